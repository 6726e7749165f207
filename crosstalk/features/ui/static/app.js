// crosstalk's local page. Every string that came from a peer (and every other string) is put
// into the page with textContent or as a text node, never as HTML: nothing a roommate writes
// can become markup or code. The token travels in a header on every state-changing request.
"use strict";

const TOKEN = document.querySelector('meta[name="ct-token"]').content;
history.replaceState(null, "", "/"); // keep the token out of the address bar and history

const $ = (id) => document.getElementById(id);
let state = {};
let current = null; // the selected room's id
let currentMark = null;
let replyTo = null; // {id, thread, label}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function button(text, testid, onclick) {
  const b = el("button", text);
  b.type = "button";
  if (testid) b.dataset.testid = testid;
  b.addEventListener("click", onclick);
  return b;
}

function fill(id, nodes) {
  const target = $(id);
  const fragment = document.createDocumentFragment();
  for (const node of nodes) fragment.appendChild(node);
  target.replaceChildren(fragment);
}

function short(fp) { return fp ? String(fp).slice(0, 12) : ""; }
function ago(ts) {
  const minutes = Math.max(0, Math.floor((Date.now() / 1000 - ts) / 60));
  return minutes < 1 ? "just now" : minutes + " min ago";
}

function age(seconds) {
  const s = Math.max(0, Math.round(Number(seconds) || 0));
  if (s < 90) return s + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  if (s < 129600) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " d";
}

function showError(text) { $("error").textContent = text || ""; }

async function getJSON(path) {
  const response = await fetch(path, { headers: { "X-Crosstalk-Token": TOKEN } });
  return response.json();
}

async function act(op, params) {
  showError("");
  const response = await fetch("/api/act/" + op, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Crosstalk-Token": TOKEN },
    body: JSON.stringify(params),
  });
  const result = await response.json();
  if (result.error) showError(result.error.code + ": " + result.error.message);
  return result;
}

// --- rooms, invitations, people ------------------------------------------------------------

function renderRooms() {
  const rooms = (state.rooms && state.rooms.rooms) || [];
  const joined = rooms.filter((r) => r.state === "joined");
  fill("rooms", joined.map((room) => {
    const li = el("li", null, room.id === current ? "room selected" : "room");
    li.dataset.testid = "room";
    li.dataset.room = room.id;
    const name = el("a", "#" + room.name, "room-name");
    name.href = "#";
    name.addEventListener("click", (e) => { e.preventDefault(); selectRoom(room.id); });
    li.appendChild(name);
    li.appendChild(el("span", room.kind, "tag"));
    const members = el("ul", null, "members");
    for (const m of room.members || []) {
      const item = el("li", null, "member");
      item.appendChild(el("span", m.label, "label"));
      item.appendChild(el("code", short(m.fingerprint)));
      item.appendChild(el("span", m.state, "tag"));
      members.appendChild(item);
    }
    li.appendChild(members);
    if (room.relay_alarm) {
      // The relay offered a membership change that does not verify (el() sets text, not HTML).
      const alarm = el("p", "warning: " + room.relay_alarm, "relay-alarm");
      alarm.dataset.testid = "relay-alarm";
      li.appendChild(alarm);
    }
    return li;
  }));
  fill("invites", rooms.filter((r) => r.state === "invited" || r.pending).map((room) => {
    const li = el("li", null, "invite");
    li.dataset.testid = "invite";
    li.appendChild(el("span", "#" + room.name, "room-name"));
    if (room.invited_by) {
      const origin = "from " + room.invited_by + (room.invited_via ? " via #" + room.invited_via : "");
      const from = el("span", origin, "invited-by");
      from.dataset.testid = "invited-by";
      li.appendChild(from);
    }
    li.appendChild(button("accept", "accept", () => act("room_accept", { room: room.id })));
    li.appendChild(button("decline", "decline", () => act("room_decline", { room: room.id })));
    return li;
  }));
}

const LEVELS = ["mute", "notify", "ask", "handoff", "deliver"];

function renderPeople() {
  const peers = (state.peers && state.peers.peers) || [];
  fill("people", peers.map((p) => {
    const li = el("li", null, "person");
    li.dataset.testid = "person";
    li.appendChild(el("span", p.label, "label"));
    li.appendChild(el("code", short(p.fingerprint)));
    li.appendChild(el("span", p.online ? "online" : "offline", p.online ? "tag on" : "tag"));
    const level = el("select");
    level.dataset.testid = "level";
    for (const name of LEVELS) {
      const option = el("option", name);
      option.value = name;
      option.selected = name === p.level;
      level.appendChild(option);
    }
    level.addEventListener("change", () => act("trust", { who: p.label, level: level.value }));
    li.appendChild(level);
    li.appendChild(button(p.muted ? "muted" : "mute", "mute",
      () => act("mute", { who: p.label, minutes: 60 })));
    const sessions = el("ul", null, "sessions");
    for (const s of p.sessions || []) {
      const item = el("li", s.name + " · " + (s.project || "-") + " · " + s.status);
      const edits = s.edits || [];
      if (edits.length) {
        const touching = el("ul", null, "edits");
        touching.dataset.testid = "edits";
        for (const e of edits.slice(0, 5)) {
          touching.appendChild(el("li", "touching " + e.repo + "/" + e.path + " · " + ago(e.edited_at)));
        }
        if (edits.length > 5) touching.appendChild(el("li", "and " + (edits.length - 5) + " more"));
        item.appendChild(touching);
      }
      sessions.appendChild(item);
    }
    li.appendChild(sessions);
    return li;
  }));
}

// --- the conversation --------------------------------------------------------------------

function roomById(id) {
  return ((state.rooms && state.rooms.rooms) || []).find((r) => r.id === id);
}

async function selectRoom(id) {
  current = id;
  currentMark = null;
  replyTo = null;
  $("replying").hidden = true;
  const room = roomById(id);
  $("room-title").textContent = room ? "#" + room.name : "";
  $("composer").hidden = false;
  renderRooms();
  await loadConversation();
}

async function loadConversation() {
  if (!current) return;
  const room = current;
  const started = performance.now();
  currentMark = (state.marks && state.marks.marks || {})[room] || null;
  const reply = await getJSON("/api/room?id=" + encodeURIComponent(room));
  if (room !== current) return;
  renderConversation(reply.messages || []);
  // How long the last conversation took, fetch included (the browser tests bound it).
  document.body.dataset.lastRender = JSON.stringify({
    room, count: (reply.messages || []).length, ms: performance.now() - started,
  });
  fill("claims", (reply.claims || []).map((c) =>
    el("li", "#" + c.seq + " " + c.outcome + (c.holder ? " · held by " + c.holder : ""))));
}

function messageNode(m, byId) {
  const li = el("li", null, "msg " + (m.mine ? "mine" : "theirs") + (m.reply_to ? " reply" : ""));
  li.dataset.testid = "message";
  li.dataset.id = m.id;
  const head = el("div", null, "head");
  head.appendChild(el("span", m.mine ? "you" : (m.from_label || short(m.sender)), "from"));
  if (m.from_session) head.appendChild(el("span", m.from_session, "tag"));
  head.appendChild(el("span", m.intent, "tag intent-" + m.intent));
  if (m.kind !== "message") head.appendChild(el("span", m.kind, "tag"));
  if (m.thread) head.appendChild(el("span", "thread " + m.thread, "tag"));
  const stateTag = el("span", m.state, "state state-" + m.state);
  stateTag.dataset.testid = "state";
  if (m.reason) stateTag.title = m.reason;
  head.appendChild(stateTag);
  head.appendChild(el("time", new Date(m.ts * 1000).toLocaleTimeString()));
  li.appendChild(head);
  if (m.reply_to) {
    const parent = byId.get(m.reply_to);
    li.appendChild(el("div", "↪ " + (parent ? parent.text.slice(0, 80) : m.reply_to.slice(0, 8)),
      "quote"));
  }
  const text = el("p", m.text, "text");
  text.dataset.testid = "text";
  li.appendChild(text);
  for (const s of m.slices || []) {
    li.appendChild(button("📎 " + s.kind + " " + s.label + " (" + s.bytes + " B)", "slice",
      () => showSlice(m.id, s.index)));
  }
  if (!m.mine) {
    li.appendChild(button("reply", "reply", () => startReply(m)));
  }
  return li;
}

function renderConversation(messages) {
  const byId = new Map(messages.map((m) => [m.id, m]));
  fill("conversation", messages.map((m) => messageNode(m, byId)));
  const pane = $("conversation");
  pane.scrollTop = pane.scrollHeight;
}

function startReply(m) {
  replyTo = m;
  $("replying-text").textContent = "answering " + (m.from_label || "") + ": " + m.text.slice(0, 60);
  $("replying").hidden = false;
  $("text").focus();
}

async function showSlice(id, index) {
  const reply = await getJSON("/api/slice?id=" + encodeURIComponent(id) + "&index=" + index);
  const pre = $("slice");
  pre.hidden = false;
  pre.textContent = reply.error ? reply.error.message : reply.label + "\n\n" + reply.content;
}

async function submit(event) {
  event.preventDefault();
  const input = $("text");
  const text = input.value;
  if (!text.trim() || !current) return;
  const room = roomById(current);
  let result;
  if (replyTo && replyTo.kind === "ask") { // an ask waits for exactly this answer
    result = await act("answer", {
      to: replyTo.from_label, correlation: replyTo.correlation || replyTo.id, text,
    });
  } else {
    const params = { to: "#" + room.name, text, intent: $("intent").value };
    if (replyTo) {
      Object.assign(params, { reply_to: replyTo.id, thread: replyTo.thread || replyTo.id });
    }
    result = await act("send", params);
  }
  if (!result.error) {
    input.value = "";
    replyTo = null;
    $("replying").hidden = true;
    await loadConversation();
  }
}

// --- search ----------------------------------------------------------------------------------

// A snippet marks each matched word as [word]: the marks become <mark> elements and everything
// else text nodes, so what a peer wrote (brackets included) never becomes markup.
function snippetNode(snippet) {
  const p = el("p", null, "text");
  const text = String(snippet);
  const marked = /\[([^\[\]]*)\]/g;
  let at = 0;
  for (const match of text.matchAll(marked)) {
    p.appendChild(document.createTextNode(text.slice(at, match.index)));
    p.appendChild(el("mark", match[1]));
    at = match.index + match[0].length;
  }
  p.appendChild(document.createTextNode(text.slice(at)));
  return p;
}

async function runSearch(event) {
  event.preventDefault();
  const words = $("search-text").value;
  if (!words.trim()) return;
  showError("");
  const reply = await getJSON("/api/search?q=" + encodeURIComponent(words));
  if (reply.error) {
    showError(reply.error.code + ": " + reply.error.message);
    fill("search-results", []);
    return;
  }
  const results = reply.results || [];
  fill("search-results", results.length ? results.map((r) => {
    const li = el("li", null, "result");
    li.dataset.testid = "search-result";
    const where = r.room && r.room !== "local" ? "#" + r.room : r.room;
    li.appendChild(el("span", r.kind + " · " + (where || "-") + " · " + (r.from || "?") + " · " +
      new Date(r.ts * 1000).toLocaleString(), "meta"));
    li.appendChild(snippetNode(r.snippet));
    return li;
  }) : [el("li", "Nothing found.", "meta")]);
}

// --- memory, attention, health ---------------------------------------------------------------

function renderMemory() {
  const facts = (state.facts && state.facts.facts) || [];
  fill("facts", facts.map((f) => {
    const li = el("li", null, "fact");
    li.dataset.testid = "fact";
    li.appendChild(el("span", f.text, "text"));
    li.appendChild(el("span", age(f.age_s) + " · confirmed by " + (f.by || []).join(", "), "meta"));
    return li;
  }));
  const tasks = (state.tasks && state.tasks.tasks) || [];
  fill("tasks", tasks.map((t) => {
    const li = el("li", null, "task");
    li.dataset.testid = "task";
    li.appendChild(el("span", t.text, "text"));
    li.appendChild(el("span", t.state + (t.claimed_by ? " · held by " + t.claimed_by : ""), "meta"));
    if (t.state === "open") li.appendChild(button("claim", "claim", () => act("task_claim", { id: t.id, room: t.room })));
    if (t.state === "claimed") li.appendChild(button("release", "release", () => act("task_release", { id: t.id, room: t.room })));
    return li;
  }));
  const decisions = (state.decisions && state.decisions.decisions) || [];
  fill("decisions", decisions.map((d) => {
    const li = el("li", null, "decision");
    li.appendChild(el("span", d.text, "text"));
    li.appendChild(el("span", "why: " + (d.why || "-") + " · " + (d.by || ""), "meta"));
    return li;
  }));
  const held = (state.reservations && state.reservations.reservations) || [];
  const now = (state.reservations && state.reservations.now) || Date.now() / 1000;
  fill("reservations", held.map((r) => {
    const li = el("li", null, "reservation");
    li.dataset.testid = "reservation";
    li.appendChild(el("span", (r.mine ? "you" : r.holder) + ": " + r.paths.join(", "), "text"));
    const left = Math.max(1, Math.ceil((r.until - now) / 60));
    const kind = r.shared ? "shared" : "exclusive";
    li.appendChild(el("span", r.repo + " · " + kind + " · " + left + " min left"
      + (r.reason ? " · " + r.reason : "") + " · #" + r.room, "meta"));
    if (r.mine) li.appendChild(button("release", "release", () => act("release", { targets: [r.id] })));
    return li;
  }));
}

function renderAttention() {
  const a = state.attention || {};
  $("attention-summary").textContent =
    "reached your agents in the last hour: " + (a.reached_last_hour || 0) + " · held: " + (a.held || 0);
  const sources = Object.entries(a.by_source || {});
  const most = Math.max(1, ...sources.map(([, n]) => n));
  fill("chart", sources.map(([name, n]) => {
    const row = el("div", null, "bar-row");
    row.appendChild(el("span", name, "bar-label"));
    const bar = el("span", String(n), "bar");
    bar.style.width = Math.round((100 * n) / most) + "%"; // CSSOM, allowed under the CSP
    row.appendChild(bar);
    return row;
  }));
  const notices = ((state.notices && state.notices.notices) || []).slice(-50).reverse();
  fill("notices", notices.map((n) => {
    const li = el("li", null, "notice decision-" + n.decision);
    li.dataset.testid = "notice";
    li.textContent = n.label + " · " + n.intent + " " + n.kind + " → " + n.decision + " (" + n.due + ")";
    return li;
  }));
}

function renderHealth() {
  const s = state.status || {};
  const relay = s.relay || {};
  $("me").textContent = (s.label || "") + " " + short(s.fingerprint);
  $("relay").textContent = "relay " + (relay.connected ? "connected" : relay.state || "down");
  $("relay").className = relay.connected ? "on" : "off";
  $("link").textContent = "relay link: " + (relay.state || "-") + " · losses " + (relay.losses || 0) +
    " · reconnect attempts " + (relay.attempts || 0) + (relay.last_loss ? " · last loss: " + relay.last_loss : "");
  const actors = (state.health && state.health.actors) || [];
  const body = $("actors").tBodies[0];
  const fragment = document.createDocumentFragment();
  for (const a of actors) {
    const tr = el("tr", null, "actor-" + a.state);
    for (const cell of [a.name, a.state, a.restarts, age(a.beat_age_s), a.last_error || ""]) {
      tr.appendChild(el("td", cell));
    }
    fragment.appendChild(tr);
  }
  body.replaceChildren(fragment);
}

function render() {
  renderRooms();
  renderPeople();
  renderMemory();
  renderAttention();
  renderHealth();
  if (!current) {
    const first = ((state.rooms && state.rooms.rooms) || []).find((r) => r.state === "joined");
    if (first) selectRoom(first.id);
  } else if (((state.marks && state.marks.marks) || {})[current] !== currentMark) {
    loadConversation();
  }
}

function connect() {
  const events = new EventSource("/api/events?t=" + encodeURIComponent(TOKEN));
  events.addEventListener("state", (e) => {
    state = JSON.parse(e.data);
    $("live").textContent = "live";
    $("live").className = "on";
    render();
  });
  events.addEventListener("error", () => {
    $("live").textContent = "reconnecting…";
    $("live").className = "off";
  });
}

$("composer").addEventListener("submit", submit);
$("search").addEventListener("submit", runSearch);
$("reply-cancel").addEventListener("click", () => { replyTo = null; $("replying").hidden = true; });
connect();
