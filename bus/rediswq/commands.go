package rediswq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/tidwall/redcon"
)

// handle answers one command. Every command writes exactly one reply, so
// that EXEC can answer with the replies of the commands it runs.
func (f *Front) handle(ctx context.Context, conn redcon.Conn, s *session, cmd redcon.Command) {
	name := strings.ToUpper(string(cmd.Args[0]))
	if s.inMulti {
		switch name {
		case "EXEC":
			queued, aborted := s.multi, s.multiErr
			s.multi, s.inMulti, s.multiErr = nil, false, false
			if aborted {
				conn.WriteError("EXECABORT Transaction discarded because of previous errors.")
				return
			}
			conn.WriteArray(len(queued))
			for _, c := range queued {
				f.run(ctx, conn, s, strings.ToUpper(string(c.Args[0])), c.Args[1:], false)
			}
		case "DISCARD":
			s.multi, s.inMulti, s.multiErr = nil, false, false
			conn.WriteString("OK")
		case "MULTI":
			conn.WriteError("ERR MULTI calls can not be nested")
		case "WATCH":
			conn.WriteError("ERR WATCH inside MULTI is not allowed")
		default:
			if err := f.check(ctx, s, name, cmd.Args); err != nil {
				s.multiErr = true
				conn.WriteError(err.Error())
				return
			}
			s.multi = append(s.multi, cmd)
			conn.WriteString("QUEUED")
		}
		return
	}
	switch name {
	case "MULTI":
		s.inMulti = true
		conn.WriteString("OK")
	case "EXEC", "DISCARD":
		conn.WriteError("ERR " + name + " without MULTI")
	case "QUIT":
		conn.WriteString("OK")
		_ = conn.Close()
	default:
		f.run(ctx, conn, s, name, cmd.Args[1:], true)
	}
}

// check validates a command's name and arity, as Redis does before it runs
// or queues one; a command the front does not serve is written to its
// job's log, once per job.
func (f *Front) check(ctx context.Context, s *session, name string, args [][]byte) error {
	c, ok := commands[name]
	if !ok {
		f.reportUnknown(ctx, s, name)
		return unknownCommand(args)
	}
	if n := len(args) - 1; n < c.min || c.max >= 0 && n > c.max {
		return replyErrorf("ERR wrong number of arguments for '%s' command", strings.ToLower(name))
	}
	return nil
}

// unknownCommand is Redis 7's reply to a command it does not know.
func unknownCommand(args [][]byte) error {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%s', with args beginning with: ", string(args[0]))
	for _, a := range args[1:] {
		if b.Len() > 128 {
			break
		}
		fmt.Fprintf(&b, "'%s' ", string(a))
	}
	return replyError(b.String())
}

func (f *Front) reportUnknown(ctx context.Context, s *session, name string) {
	f.mu.Lock()
	q := s.q
	first := q != nil && !q.reported[name]
	if first {
		q.reported[name] = true
	}
	f.mu.Unlock()
	if first {
		f.journal(ctx, q, fmt.Sprintf("a Redis client sent %s, which the Redis front does not serve (docs/asperathos.md lists the commands it does); it got Redis' unknown-command error", name))
	}
}

// run answers one command; block is false inside MULTI, where blocking
// commands return at once. Items the connection removed from its
// processing list are settled first, unless this command gives them back.
func (f *Front) run(ctx context.Context, conn redcon.Conn, s *session, name string, args [][]byte, block bool) {
	all := append([][]byte{[]byte(name)}, args...)
	if err := f.check(ctx, s, name, all); err != nil {
		conn.WriteError(err.Error())
		return
	}
	f.settleRemoved(ctx, s, name, args)
	c := &call{ctx: ctx, conn: conn, s: s, name: name, args: args, block: block}
	if err := commands[name].do(f, c); err != nil {
		conn.WriteError(redisError(err))
	}
}

// replyError is an error reply worded exactly as Redis words it, its code
// first, full stop included: clients match on it.
type replyError string

func (e replyError) Error() string { return string(e) }

func replyErrorf(format string, args ...any) error { return replyError(fmt.Sprintf(format, args...)) }

// redisError is err as a Redis error reply: its first word is an error
// code (ERR unless it starts with one), on one line.
func redisError(err error) string {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	code, _, _ := strings.Cut(msg, " ")
	if code == "" || strings.IndexFunc(code, func(r rune) bool { return !unicode.IsUpper(r) }) >= 0 {
		msg = "ERR " + msg
	}
	return msg
}

// call is one command being answered.
type call struct {
	ctx   context.Context
	conn  redcon.Conn
	s     *session
	name  string
	args  [][]byte
	block bool
}

func (c *call) arg(i int) string { return string(c.args[i]) }

// command answers one Redis command: it writes a reply, or returns the
// error to answer with.
type command struct {
	min, max int // arguments, not counting the command's name; max -1: any
	do       func(f *Front, c *call) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		// The connection.
		"PING":    {0, 1, (*Front).ping},
		"ECHO":    {1, 1, func(_ *Front, c *call) error { c.conn.WriteBulk(c.args[0]); return nil }},
		"HELLO":   {0, -1, (*Front).hello},
		"AUTH":    {1, 2, (*Front).auth},
		"SELECT":  {1, 1, selectDB},
		"CLIENT":  {1, -1, (*Front).client},
		"WATCH":   {1, -1, ok},
		"UNWATCH": {0, 0, ok},
		"INFO":    {0, -1, info},
		"COMMAND": {0, -1, commandInfo},
		// Any key.
		"DEL":     {1, -1, (*Front).del},
		"UNLINK":  {1, -1, (*Front).del},
		"EXISTS":  {1, -1, (*Front).exists},
		"TYPE":    {1, 1, (*Front).typ},
		"EXPIRE":  {2, 3, (*Front).expire},
		"PEXPIRE": {2, 3, (*Front).expire},
		"PERSIST": {1, 1, (*Front).persist},
		"TTL":     {1, 1, (*Front).ttl},
		"PTTL":    {1, 1, (*Front).ttl},
		// Strings.
		"GET":    {1, 1, (*Front).get},
		"MGET":   {1, -1, (*Front).mget},
		"SET":    {2, -1, (*Front).set},
		"SETEX":  {3, 3, (*Front).set},
		"PSETEX": {3, 3, (*Front).set},
		"SETNX":  {2, 2, (*Front).set},
		"INCR":   {1, 1, (*Front).incr},
		"DECR":   {1, 1, (*Front).incr},
		"INCRBY": {2, 2, (*Front).incr},
		"DECRBY": {2, 2, (*Front).incr},
		// Lists: the queue's, and private ones.
		"BRPOPLPUSH": {3, 3, (*Front).popPush},
		"RPOPLPUSH":  {2, 2, (*Front).popPush},
		"BLMOVE":     {5, 5, (*Front).popPush},
		"LMOVE":      {4, 4, (*Front).popPush},
		"LLEN":       {1, 1, (*Front).llen},
		"LRANGE":     {3, 3, (*Front).lrange},
		"LINDEX":     {2, 2, (*Front).lindex},
		"LREM":       {3, 3, (*Front).lrem},
		"RPUSH":      {2, -1, (*Front).push},
		"LPUSH":      {2, -1, (*Front).push},
		"RPOP":       {1, 2, (*Front).pop},
		"LPOP":       {1, 2, (*Front).pop},
	}
}

func ok(_ *Front, c *call) error { c.conn.WriteString("OK"); return nil }

func (f *Front) ping(c *call) error {
	if len(c.args) == 1 {
		c.conn.WriteBulk(c.args[0])
	} else {
		c.conn.WriteString("PONG")
	}
	return nil
}

// serverVersion is the Redis version the front answers as: the commands it
// serves behave as Redis 7.0's.
const serverVersion = "7.0.0"

// hello negotiates the protocol (HELLO [2|3] [AUTH user pass] [SETNAME
// name]); RESP3 changes only HELLO's own reply here, since every other
// reply the front writes reads the same in both.
func (f *Front) hello(c *call) error {
	proto := c.s.proto
	if len(c.args) > 0 {
		v, err := strconv.Atoi(c.arg(0))
		if err != nil {
			return replyError("ERR Protocol version is not an integer or out of range")
		}
		if v != 2 && v != 3 {
			return replyError("NOPROTO unsupported protocol version")
		}
		proto = v
	}
	var setName *string
	for i := 1; i < len(c.args); i++ {
		switch opt := strings.ToUpper(c.arg(i)); {
		case opt == "AUTH" && i+2 < len(c.args):
			if err := f.authenticate(c.ctx, c.s, c.arg(i+2)); err != nil {
				return err
			}
			i += 2
		case opt == "SETNAME" && i+1 < len(c.args):
			n := c.arg(i + 1)
			setName = &n
			i++
		default:
			return replyErrorf("ERR Syntax error in HELLO option '%s'", c.arg(i))
		}
	}
	if setName != nil {
		c.s.name = *setName
	}
	c.s.proto = proto
	fields := []string{"server", "redis", "version", serverVersion, "proto", "", "id", "", "mode", "standalone", "role", "master"}
	if proto == 3 {
		c.conn.WriteRaw([]byte("%7\r\n"))
	} else {
		c.conn.WriteArray(14)
	}
	for i := 0; i < len(fields); i += 2 {
		c.conn.WriteBulkString(fields[i])
		switch fields[i] {
		case "proto":
			c.conn.WriteInt(proto)
		case "id":
			c.conn.WriteInt64(c.s.num)
		default:
			c.conn.WriteBulkString(fields[i+1])
		}
	}
	c.conn.WriteBulkString("modules")
	c.conn.WriteArray(0)
	return nil
}

// auth authenticates with a job's token (AUTH token, or AUTH user token):
// the connection is then bound to that job, whose queue it may name by
// the job's id.
func (f *Front) auth(c *call) error {
	if err := f.authenticate(c.ctx, c.s, c.arg(len(c.args)-1)); err != nil {
		return err
	}
	c.conn.WriteString("OK")
	return nil
}

func (f *Front) authenticate(ctx context.Context, s *session, token string) error {
	job, isToken := jobOfToken(token)
	switch {
	case !isToken && f.cfg.Secured:
		return replyError("WRONGPASS invalid username-password pair or user is disabled.")
	case !isToken:
		return replyError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	}
	f.mu.Lock()
	same := s.q != nil && s.q.job == job
	if same {
		s.names = []string{token, job}
	}
	f.mu.Unlock()
	s.token = token
	if same {
		return nil
	}
	f.detach(ctx, s)
	err := f.attach(ctx, s, job, token, []string{token, job})
	if errors.Is(err, errNoJob) {
		return replyError("WRONGPASS invalid username-password pair or user is disabled.")
	}
	return err
}

func selectDB(_ *Front, c *call) error {
	n, err := strconv.Atoi(c.arg(0))
	if err != nil {
		return replyError("ERR value is not an integer or out of range")
	}
	if n != 0 {
		return replyError("ERR DB index is out of range")
	}
	c.conn.WriteString("OK")
	return nil
}

// client answers the CLIENT subcommands client libraries send on their
// own: naming the connection, identifying their library, asking its id.
func (f *Front) client(c *call) error {
	sub := strings.ToUpper(c.arg(0))
	switch {
	case sub == "SETNAME" && len(c.args) == 2:
		n := c.arg(1)
		if strings.IndexFunc(n, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			return replyError("ERR Client names cannot contain spaces, newlines or special characters.")
		}
		c.s.name = n
		c.conn.WriteString("OK")
	case sub == "GETNAME" && len(c.args) == 1:
		if c.s.name == "" {
			c.conn.WriteNull()
		} else {
			c.conn.WriteBulkString(c.s.name)
		}
	case sub == "ID" && len(c.args) == 1:
		c.conn.WriteInt64(c.s.num)
	case sub == "SETINFO" && len(c.args) == 3:
		if attr := strings.ToUpper(c.arg(1)); attr != "LIB-NAME" && attr != "LIB-VER" {
			return replyErrorf("ERR Unrecognized option '%s'", c.arg(1))
		}
		c.conn.WriteString("OK")
	case sub == "INFO" && len(c.args) == 1:
		c.conn.WriteBulkString(fmt.Sprintf("id=%d addr=%s name=%s db=0 resp=%d\n", c.s.num, c.conn.RemoteAddr(), c.s.name, c.s.proto))
	case sub == "SETNAME" || sub == "GETNAME" || sub == "ID" || sub == "SETINFO" || sub == "INFO":
		return replyErrorf("ERR wrong number of arguments for 'client|%s' command", strings.ToLower(sub))
	default:
		return replyErrorf("ERR unknown subcommand '%s'. Try CLIENT HELP.", c.arg(0))
	}
	return nil
}

func info(_ *Front, c *call) error {
	c.conn.WriteBulkString("# Server\r\nredis_version:" + serverVersion + "\r\nredis_mode:standalone\r\nos:pace-rediswq\r\n")
	return nil
}

// commandInfo answers COMMAND and its subcommands with no documentation:
// clients use it for hints only.
func commandInfo(_ *Front, c *call) error {
	if len(c.args) > 0 && strings.EqualFold(c.arg(0), "COUNT") {
		c.conn.WriteInt(len(commands))
		return nil
	}
	c.conn.WriteArray(0)
	return nil
}
