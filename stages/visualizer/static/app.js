"use strict";
// Pace UI: reads Server-Sent Events with fetch (so the bearer token can be
// sent in the Authorization header, which EventSource cannot do).
(function () {
  const KEY = "pace-token";
  const $ = (id) => document.getElementById(id);
  const token = () => sessionStorage.getItem(KEY) || "";
  const headers = () => (token() ? { Authorization: "Bearer " + token() } : {});
  let current = null; // AbortController of the open stream

  function notice(msg) { $("notice").textContent = msg || ""; }

  function showLogin() {
    // A late answer must not wipe a token being typed.
    if (document.activeElement !== $("token")) $("token").value = "";
    $("logout").hidden = !token();
  }

  // stream reads url as text/event-stream and calls on(event, data) per event;
  // it reconnects after an error unless done() says the page is finished.
  async function stream(url, on, done) {
    if (current) current.abort();
    const ctl = new AbortController();
    current = ctl;
    for (;;) {
      try {
        const r = await fetch(url, { headers: headers(), signal: ctl.signal });
        if (ctl.signal.aborted) return; // superseded, e.g. by a sign-in
        if (r.status === 401 && !token()) { notice("Sign in with your API token."); showLogin(); return; }
        if (r.status === 401 || r.status === 403) { notice("Sign in: this token may not see it (" + r.status + ")."); showLogin(); return; }
        if (r.status === 404) { notice("Not found."); return; }
        if (r.status === 429) { // too many pages open: wait as long as asked
          const s = Number(r.headers.get("Retry-After")) || 5;
          notice("Too many pages open; retrying in " + s + " s.");
          await new Promise((res) => setTimeout(res, 1000 * s));
          continue;
        }
        if (!r.ok) throw new Error("HTTP " + r.status);
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done: end } = await reader.read();
          if (end) break;
          buf += value;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            let ev = "message", data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) ev = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (data) on(ev, JSON.parse(data));
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
        notice("Connection lost, retrying…");
      }
      if (ctl.signal.aborted || (done && done())) return;
      await new Promise((res) => setTimeout(res, 2000));
    }
  }

  const pct = (x) => (100 * x).toFixed(0) + "%";
  // done/total, or the done count alone for a streaming job (no total).
  const count = (j) => j.total === undefined ? j.done + " done" : j.done + "/" + j.total;
  const when = (s) => (s ? new Date(s).toLocaleTimeString() : "—");

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    if (text instanceof Node) td.append(text); else td.textContent = text;
    if (cls) td.className = cls;
    tr.append(td);
    return td;
  }

  function renderList(rows) {
    const tb = $("jobs").tBodies[0];
    tb.replaceChildren();
    $("no-jobs").hidden = rows.length > 0;
    for (const j of rows) {
      const tr = document.createElement("tr");
      tr.dataset.job = j.id;
      const a = document.createElement("a");
      a.href = "/ui/jobs/" + encodeURIComponent(j.id);
      a.textContent = j.name || j.id;
      a.title = j.id;
      cell(tr, a);
      cell(tr, j.owner || "—");
      cell(tr, j.state, "status state-" + j.state);
      const p = document.createElement("progress");
      p.max = 1; p.value = j.progress; p.setAttribute("aria-label", "Progress of " + (j.name || j.id));
      const span = document.createElement("span");
      span.append(p, " " + pct(j.progress) + " (" + count(j) + ")");
      cell(tr, span, "progress");
      cell(tr, String(j.replicas), "replicas");
      cell(tr, when(j.deadline));
      tb.append(tr);
    }
  }

  let final = false;
  function renderJob(v) {
    document.title = (v.name || v.id) + " · Pace";
    $("job-name").textContent = v.name || v.id;
    const st = $("job-status");
    st.textContent = v.state + (v.stop_requested && !v.final ? " (stopping)" : "");
    st.className = "badge state-" + v.state;
    $("job-reason").textContent = v.reason || "";
    const tr = $("job-trace");
    tr.hidden = !v.trace_url;
    if (v.trace_url) tr.href = v.trace_url;
    $("job-progress").value = v.progress;
    $("job-percent").textContent = pct(v.progress) + " (" + count(v) + ")";
    $("job-deadline").textContent = when(v.deadline);
    $("job-replicas").textContent = String(v.replicas);
    $("job-owner").textContent = v.owner || "—";
    $("job-pending").textContent = String(v.pending);
    $("job-processing").textContent = String(v.processing);
    $("job-dead").textContent = String(v.dead);
    const l = v.latest;
    $("job-error").textContent = l ? l.error.toFixed(3) : "—";
    $("job-throughput").textContent = l ? l.throughput.toFixed(2) + " items/s" : "—";
    $("job-eta").textContent = l && l.eta ? l.eta : "—";
    $("progress-box").innerHTML = v.progress_svg; // rendered and escaped by the server
    $("replicas-box").innerHTML = v.replicas_svg;
    const ol = $("decisions");
    ol.replaceChildren(...v.decisions.slice().reverse().map((d) => {
      const li = document.createElement("li");
      li.textContent = when(d.at) + " " + d.type + (d.replicas ? " → " + d.replicas + " replicas" : "") + (d.reason ? ": " + d.reason : "");
      return li;
    }));
    $("log").textContent = v.log.map((x) => (x.at ? new Date(x.at).toLocaleTimeString() + " " : "") + (x.source ? "[" + x.source + "] " : "") + readable(x.line)).join("\n");
    final = v.final;
    $("stop").disabled = v.final || v.stop_requested;
    $("terminate").disabled = v.final;
  }

  // readable shows a structured line (a JSON record with msg, as Pace's
  // workers log) as "LEVEL msg key=value …", like pace logs; other lines as
  // written.
  function readable(line) {
    if (!line || line[0] !== "{") return line;
    let rec;
    try { rec = JSON.parse(line); } catch (e) { return line; }
    if (!rec || typeof rec.msg !== "string") return line;
    const fields = Object.keys(rec).filter((k) => k !== "msg" && k !== "level" && k !== "time").sort()
      .map((k) => k + "=" + (typeof rec[k] === "string" && rec[k] !== "" && !/[ "=]/.test(rec[k]) ? rec[k] : JSON.stringify(rec[k])));
    return [rec.level || "INFO", rec.msg, ...fields].join(" ");
  }

  async function command(id, verb) {
    notice(verb === "stop" ? "Stopping…" : "Terminating…");
    const r = await fetch("/submissions/" + encodeURIComponent(id) + "/" + verb, { method: "PUT", headers: headers() });
    if (r.ok) { notice(verb === "stop" ? "Stop requested." : "Terminated."); return; }
    let msg = "HTTP " + r.status;
    try { msg = (await r.json()).message || msg; } catch (e) { /* not JSON */ }
    notice(verb + " refused: " + msg);
  }

  // Each process holding APF state gets a copy of the #fc-process template:
  // pace up has one (its job API and gate share APF), pace stage one per
  // gate leader and manager replica that answered.
  const stageNames = { gate: "Gate", manager: "Manager" };
  function renderFlowControl(v) {
    const miss = v.missing || [];
    $("fc-missing").hidden = miss.length === 0;
    $("fc-missing").textContent = miss.length === 0 ? "" : "No answer from the " + miss.join(" or the ") +
      (v.processes.length === 0 ? ": their flow-control state is unknown. Check that the stages run and may answer on NATS." : ".");
    $("fc-processes").replaceChildren(...v.processes.map((p) => {
      const sec = $("fc-process").content.firstElementChild.cloneNode(true);
      const name = p.stage ? (stageNames[p.stage] || p.stage) + " (" + p.replica + ")" : "Job API and gate";
      sec.dataset.stage = p.stage || "";
      sec.dataset.replica = p.replica || "";
      sec.querySelector(".fc-source").textContent = name;
      sec.querySelector(".levels caption").textContent = "Priority levels of " + name;
      sec.querySelector(".flows caption").textContent = "Top flows of " + name;
      const lv = sec.querySelector(".levels tbody");
      for (const l of p.levels) {
        const tr = document.createElement("tr");
        tr.dataset.level = l.name;
        for (const c of [l.name + (l.lingering ? " (removed)" : ""), l.nominal, l.current + " (" + l.min + "–" + l.max + ")", l.seats_in_use, l.executing, l.waiting, l.dispatched, l.rejected, l.timed_out]) cell(tr, String(c));
        lv.append(tr);
      }
      const fl = sec.querySelector(".flows tbody");
      sec.querySelector(".no-flows").hidden = p.flows.length > 0;
      for (const f of p.flows) {
        const tr = document.createElement("tr");
        for (const c of [f.flow || "—", f.flow_schema, f.level, f.seats, f.executing, f.waiting]) cell(tr, String(c));
        fl.append(tr);
      }
      return sec;
    }));
  }

  function route() {
    const m = location.pathname.match(/^\/ui\/jobs\/([^/]+)$/);
    const fc = location.pathname === "/ui/flowcontrol";
    $("list-page").hidden = !!m || fc;
    $("job-page").hidden = !m;
    $("fc-page").hidden = !fc;
    if (fc) {
      document.title = "Flow control · Pace";
      stream("/ui/events/flowcontrol", (ev, d) => {
        if (ev === "flowcontrol") { renderFlowControl(d); notice(""); }
        else if (ev === "failure") notice(d.message);
      });
    } else if (m) {
      const id = decodeURIComponent(m[1]);
      final = false;
      $("stop").onclick = () => command(id, "stop");
      $("terminate").onclick = () => { if (confirm("Terminate " + id + " now? Items in flight are lost.")) command(id, "terminate"); };
      stream("/ui/events/jobs/" + encodeURIComponent(id), (ev, d) => {
        if (ev === "job") { renderJob(d); if (!$("notice").textContent.startsWith("Stop")) notice(""); }
        else if (ev === "failure") notice(d.message);
      }, () => final);
    } else {
      document.title = "Jobs · Pace";
      stream("/ui/events/jobs", (ev, d) => {
        if (ev === "jobs") { renderList(d); notice(""); }
        else if (ev === "failure") notice(d.message);
      });
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", (e) => {
      e.preventDefault();
      const t = $("token").value.trim();
      if (t) sessionStorage.setItem(KEY, t);
      showLogin();
      route();
    });
    $("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY); showLogin(); route(); });
    showLogin();
    route();
  });
})();
