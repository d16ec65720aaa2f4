package queueset

import "github.com/pace-platform/pace/flowcontrol/work"

// requestList is an intrusive doubly linked list of requests. A request is
// in at most one list at a time (a queue's waiting list or the executing list).
type requestList struct {
	head, tail *Request
	n          int
}

func (l *requestList) pushBack(r *Request) {
	r.prev, r.next, r.list = l.tail, nil, l
	if l.tail == nil {
		l.head = r
	} else {
		l.tail.next = r
	}
	l.tail = r
	l.n++
}

// remove unlinks r and reports whether it was in l.
func (l *requestList) remove(r *Request) bool {
	if r.list != l {
		return false
	}
	if r.prev == nil {
		l.head = r.next
	} else {
		r.prev.next = r.next
	}
	if r.next == nil {
		l.tail = r.prev
	} else {
		r.next.prev = r.prev
	}
	r.prev, r.next, r.list = nil, nil, nil
	l.n--
	return true
}

// queue is one FIFO of a queue set.
type queue struct {
	index         int // position in qs.queues; −1 once removed
	waiting       requestList
	executing     int // requests of this queue in their initial phase
	seatsInUse    int // MaxSeats of dispatched requests not yet released, lingering ones included
	nextDispatchR work.SeatSeconds

	// sums over waiting requests
	initialSeatsSum int
	maxSeatsSum     int
	totalWorkSum    work.SeatSeconds
}

func (q *queue) active() bool { return q.waiting.n > 0 || q.executing > 0 }

func (q *queue) enqueue(r *Request) {
	q.waiting.pushBack(r)
	q.initialSeatsSum += r.est.InitialSeats
	q.maxSeatsSum += r.est.MaxSeats()
	q.totalWorkSum += r.est.TotalWork()
}

// withdraw removes a waiting request and reports whether it was waiting here.
func (q *queue) withdraw(r *Request) bool {
	if !q.waiting.remove(r) {
		return false
	}
	q.initialSeatsSum -= r.est.InitialSeats
	q.maxSeatsSum -= r.est.MaxSeats()
	q.totalWorkSum -= r.est.TotalWork()
	return true
}
