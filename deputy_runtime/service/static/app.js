// The live delegation tree of one run, folded from the run's server-sent events, and the
// list of the client's runs (GET /runs). The run on screen is named in the address
// (#run=ID), so a reload or a shared link opens it again: its events are replayed from
// the server's log. The token lives in sessionStorage and goes out as an Authorization header; the event
// stream is read with fetch (EventSource cannot send headers) and resumed with
// Last-Event-ID when the connection drops. Text from the server is only ever set with
// textContent, never parsed as HTML.
"use strict";

const KEY = "deputy-runtime-token";
const $ = (id) => document.getElementById(id);
let state = null; // the tree of the run on screen
const colours = new Map(); // agent name -> its definition's color (GET /agents)

function token() { return sessionStorage.getItem(KEY); }

function say(text) { $("message").textContent = text || ""; }

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + token() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    const refused = "The token was refused.";
    showLogin(refused);
    throw new Error(refused);
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function showLogin(message) {
  sessionStorage.removeItem(KEY);
  $("login").hidden = false;
  $("app").hidden = true;
  say(message);
}

async function showApp() {
  const data = await api("GET", "/agents");
  const box = $("agents");
  box.replaceChildren(box.firstElementChild);
  colours.clear();
  for (const agent of data.agents) {
    if (agent.color) colours.set(agent.name, agent.color);
    const label = document.createElement("label");
    const check = document.createElement("input");
    check.type = "checkbox";
    check.checked = true;
    check.value = agent.name;
    label.title = agent.description;
    label.append(check, " " + agent.name);
    box.append(label);
  }
  $("login").hidden = true;
  $("app").hidden = false;
  say("");
  await refreshRuns();
  const wanted = hashRun();
  if (wanted && (!state || state.id !== wanted)) await openRun(wanted);
}

// -- the run list -------------------------------------------------------------------------

function hashRun() {
  const match = /^#run=(run_[0-9a-f]+)$/.exec(location.hash);
  return match ? match[1] : null;
}

function when(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
}

async function refreshRuns() {
  const data = await api("GET", "/runs");
  const items = data.runs.map((run) => {
    const link = document.createElement("a");
    link.href = "#run=" + run.id;
    link.dataset.run = run.id;
    link.dataset.status = run.status;
    if (state && state.id === run.id) link.className = "current";
    const task = document.createElement("span");
    task.className = "task";
    task.textContent = run.task;
    link.title = run.task;
    const status = document.createElement("span");
    status.className = "status status-" + run.status;
    status.textContent = run.status;
    const time = document.createElement("span");
    time.className = "when";
    time.textContent = " " + when(run.created_at) + " · " + run.provider + "/" + run.model;
    link.append(task, status, time);
    const item = document.createElement("li");
    item.append(link);
    return item;
  });
  $("run-list").replaceChildren(...items);
  $("runs-empty").hidden = items.length > 0;
}

// -- the tree -------------------------------------------------------------------------

function newNode(name, delegationId, limits) {
  return {
    name, delegationId, limits, children: [], status: "running", stopReason: null,
    started: performance.now(), ended: null, requests: 0, tokens: 0, cost: null, usage: null,
    lastTool: "", exact: null,
  };
}

function statusOf(reason) {
  if (reason === "complete") return "completed";
  if (reason === "error" || reason === "provider_error") return "failed";
  return reason === "interrupted" ? "interrupted" : "stopped";
}

function callText(event) {
  const args = event.arguments || {};
  if (event.tool_name === "delegate_to_agent" && args.agent_name) {
    return event.tool_name + "(" + args.agent_name + ")";
  }
  let joined = Object.entries(args).map(([k, v]) => k + "=" + JSON.stringify(v)).join(", ");
  if (joined.length > 40) joined = joined.slice(0, 37) + "...";
  return event.tool_name + "(" + joined + ")";
}

// A running MCP call's progress, as the CLI's live view writes it: "tool 3/10 message".
function progressText(event) {
  const done = String(event.progress) + (event.total === null || event.total === undefined ? "" : "/" + event.total);
  let message = (event.message || "").replace(/\s+/g, " ").trim();
  if (message.length > 60) message = message.slice(0, 57) + "...";
  return (event.title || event.tool) + " " + done + (message ? " " + message : "");
}

function apply(event) {
  const s = state;
  if (event.type === "run_start" && !event.delegation_id) {
    if (!s.lead) {
      s.lead = newNode(event.agent_name || "lead", null, event.limits);
      s.nodes.set("lead", s.lead);
      s.byAgent.set(event.agent_id, s.lead);
    }
    return;
  }
  if (event.type === "delegation_start" || (event.type === "delegation_end" && !s.nodes.has(event.delegation_id))) {
    const node = newNode(event.agent_name || "subagent", event.delegation_id, event.limits || null);
    s.nodes.set(event.delegation_id, node);
    s.byAgent.set(event.agent_id, node);
    const parent = s.byAgent.get(event.parent_agent_id) || s.lead;
    if (parent) parent.children.push(node);
    if (event.type === "delegation_start") return;
  }
  const node = s.nodes.get(event.delegation_id || "lead");
  if (!node) return;
  switch (event.type) {
    case "model_request": node.requests = Math.max(node.requests, event.index); break;
    case "model_response":
      node.tokens += event.input_tokens + event.output_tokens;
      if (event.cost_usd !== null && event.cost_usd !== undefined) node.cost = (node.cost ?? 0) + event.cost_usd;
      break;
    case "tool_start": node.lastTool = callText(event); break;
    case "tool_end": if (event.error) node.lastTool = event.tool_name + " failed"; break;
    case "mcp_progress": node.lastTool = progressText(event); break;
    case "usage": if (!event.delegation_id) node.usage = event.usage; break;
    case "stop":
      if (!event.delegation_id) {
        node.usage = event.usage; node.status = statusOf(event.stop_reason);
        node.stopReason = event.stop_reason; node.ended = performance.now();
      }
      break;
    case "delegation_end":
      node.usage = event.usage; node.status = event.status;
      node.stopReason = event.stop_reason; node.ended = performance.now();
      break;
  }
}

function liveRequests(n) {
  return n.usage ? n.usage.requests : n.requests + n.children.reduce((a, c) => a + liveRequests(c), 0);
}
function liveTokens(n) {
  if (n.usage) return n.usage.input_tokens + n.usage.output_tokens;
  return n.tokens + n.children.reduce((a, c) => a + liveTokens(c), 0);
}
// Cost so far, counted like liveRequests; null while no response reported one.
function liveCost(n) {
  if (n.usage) return n.usage.cost_usd ?? null;
  return n.children.reduce((a, c) => {
    const b = liveCost(c);
    return a === null ? b : b === null ? a : a + b;
  }, n.cost);
}
// A provider without prices reports no cost: shown as a dash, never as $0.
function cost(usage) {
  if (!usage || usage.cost_usd === null || usage.cost_usd === undefined) return "—";
  return "$" + usage.cost_usd.toFixed(usage.cost_usd < 0.01 ? 4 : 2);
}
function budget(used, limit) { return limit === null || limit === undefined ? String(used) : used + "/" + limit; }

function setText(td, text) { if (td.textContent !== text) td.textContent = text; }

// One persistent row per node, updated in place: a row (and its button) is never
// replaced while it is on screen, so a click cannot land on an element being swapped out.
function rowFor(node) {
  const key = node.delegationId || "lead";
  let tr = state.rows.get(key);
  if (!tr) {
    tr = document.createElement("tr");
    tr.dataset.agent = node.name;
    tr.dataset.node = key;
    for (let i = 0; i < 8; i++) tr.append(document.createElement("td"));
    // The tree's branch, then the agent's name in its own element (for its colour).
    const name = document.createElement("span");
    name.className = "agent";
    if (node.delegationId && colours.has(node.name)) name.dataset.colour = colours.get(node.name);
    tr.cells[0].append(document.createTextNode(""), name);
    for (const i of [2, 3, 4, 5]) tr.cells[i].className = "num";
    tr.cells[6].className = "tool";
    state.rows.set(key, tr);
  }
  return tr;
}

function rowsOf(node, prefix, childPrefix, rows) {
  rows.push([node, prefix]);
  node.children.forEach((child, i) => {
    const last = i === node.children.length - 1;
    rowsOf(child, childPrefix + (last ? "└─ " : "├─ "), childPrefix + (last ? "   " : "│  "), rows);
  });
}

function render() {
  if (!state || !state.lead) return;
  const now = performance.now();
  const rows = [];
  rowsOf(state.lead, "", "", rows);
  const body = $("tree").tBodies[0];
  rows.forEach(([node, prefix], index) => {
    const tr = rowFor(node);
    tr.dataset.status = node.status;
    const cells = tr.cells;
    const branch = cells[0].firstChild;
    if (branch.data !== prefix) branch.data = prefix;
    setText(cells[0].lastChild, node.name);
    const reason = node.stopReason && node.stopReason !== "complete" ? " (" + node.stopReason + ")" : "";
    setText(cells[1], node.status + reason);
    cells[1].className = "status status-" + node.status;
    const seconds = node.exact ?? ((node.ended ?? now) - node.started) / 1000;
    setText(cells[2], seconds.toFixed(1) + "s");
    const limits = node.limits || {};
    setText(cells[3], budget(liveRequests(node), limits.max_requests));
    setText(cells[4], budget(liveTokens(node), limits.max_total_tokens));
    setText(cells[5], cost({ cost_usd: liveCost(node) }));
    setText(cells[6], node.lastTool);
    cells[6].title = node.lastTool;
    if (node.usage) {
      cells[4].title = node.usage.input_tokens + " in, " + node.usage.output_tokens + " out";
    }
    const button = cells[7].querySelector("button");
    if (node.delegationId && node.status === "running" && !button) {
      const interrupt = document.createElement("button");
      interrupt.type = "button";
      interrupt.className = "interrupt";
      interrupt.textContent = "Interrupt";
      interrupt.addEventListener("click", () => interruptDelegation(node.delegationId, interrupt));
      cells[7].append(interrupt);
    } else if (button && node.status !== "running") {
      button.remove();
    }
    if (body.children[index] !== tr) body.insertBefore(tr, body.children[index] || null);
  });
}

// -- the run and its event stream -------------------------------------------------------

async function interruptDelegation(delegationId, button) {
  button.disabled = true;
  try {
    await api("POST", "/runs/" + state.id + "/delegations/" + delegationId + "/interrupt");
    button.textContent = "Interrupting";
  } catch (error) { say(error.message); }
}

async function follow(runId) {
  const mine = state; // this stream feeds this tree only; opening a run replaces it
  let lastId = 0;
  for (let attempt = 0; attempt < 20; attempt++) {
    if (state !== mine) return;
    try {
      const response = await fetch("/runs/" + runId + "/events", {
        headers: { Authorization: "Bearer " + token(), "Last-Event-ID": String(lastId) },
      });
      if (response.status === 401) { showLogin("The token was refused."); return; }
      if (!response.ok) throw new Error("events: HTTP " + response.status);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        if (state !== mine) { reader.cancel(); return; } // another run is shown
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const message = { id: null, event: "message", data: "" };
          for (const line of block.split("\n")) {
            if (line.startsWith("id: ")) message.id = Number(line.slice(4));
            else if (line.startsWith("event: ")) message.event = line.slice(7);
            else if (line.startsWith("data: ")) message.data += line.slice(6);
          }
          if (message.event === "end") { await finish(runId); return; }
          if (message.event === "truncated") { say("Some early events were dropped from the server's log."); continue; }
          if (message.event !== "message" || !message.data) continue;
          if (message.id !== null) lastId = message.id;
          const event = JSON.parse(message.data);
          if (state !== mine) return;
          apply(event);
          if (event.type === "delegation_end") scheduleReconcile(runId);
        }
        render();
      }
    } catch (error) {
      say("Event stream interrupted (" + error.message + "); resuming.");
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

// Events carry no times, so elapsed is first measured when events arrive here; once a
// delegation or the run has ended, the server's own times replace that measurement.
function reconcile(run) {
  if (!state || state.id !== run.id) return;
  for (const record of run.records) {
    const node = state.nodes.get(record.delegation_id);
    if (node && record.started_at !== null && record.completed_at !== null) {
      node.exact = record.completed_at - record.started_at;
    }
  }
  if (state.lead && run.finished_at !== null) state.lead.exact = run.finished_at - run.created_at;
}

function scheduleReconcile(runId) {
  if (state.reconciling) return;
  state.reconciling = true;
  setTimeout(async () => {
    state.reconciling = false;
    try { reconcile(await api("GET", "/runs/" + runId)); } catch (error) { /* the next one will */ }
  }, 500);
}

function showMeta(run) {
  $("run-task").textContent = run.task;
  $("run-model").textContent = run.provider + "/" + run.model;
  const limits = Object.entries(run.limits || {}).filter(([k, v]) => k.startsWith("max_") && v !== null);
  $("run-limits").textContent = limits.length
    ? limits.map(([k, v]) => k + " " + v).join(" · ") + " · permission mode " + run.permission_mode
    : "none · permission mode " + run.permission_mode;
  const usage = run.result ? run.result.usage : null;
  $("run-usage").textContent = usage
    ? usage.requests + " requests · " + usage.input_tokens + " in / " + usage.output_tokens +
      " out tokens · " + usage.tool_calls + " tool calls · cost " + cost(usage)
    : "running";
}

async function finish(runId) {
  const run = await api("GET", "/runs/" + runId);
  if (!state || state.id !== runId) return;
  reconcile(run);
  showMeta(run);
  $("run-status").textContent = run.status;
  $("run-status").className = "status status-" + run.status;
  $("interrupt-run").hidden = true;
  if (run.result) {
    $("answer").textContent = run.result.response;
    $("answer-title").hidden = !run.result.response;
  }
  render();
  refreshRuns().catch(() => {});
}

// Show one run (from its link, a reload or a start): its events are read from the first.
async function openRun(runId) {
  let run;
  try { run = await api("GET", "/runs/" + runId); } catch (error) {
    say("Run " + runId + ": " + error.message + " (finished runs are kept for --keep-runs newer ones).");
    return;
  }
  state = { id: run.id, lead: null, nodes: new Map(), byAgent: new Map(), rows: new Map(),
    reconciling: false };
  $("tree").tBodies[0].replaceChildren();
  $("run").hidden = false;
  $("run-id").textContent = run.id;
  $("run-id").href = "#run=" + run.id;
  $("run-status").textContent = run.status;
  $("run-status").className = "status status-" + run.status;
  $("interrupt-run").hidden = run.status !== "running";
  $("answer").textContent = "";
  $("answer-title").hidden = true;
  showMeta(run);
  for (const link of $("run-list").querySelectorAll("a")) {
    link.classList.toggle("current", link.dataset.run === run.id);
  }
  say("");
  follow(run.id);
}

async function startRun(event) {
  event.preventDefault();
  const agents = [...$("agents").querySelectorAll("input:checked")].map((c) => c.value);
  const body = { task: $("task").value, agents };
  if ($("max-requests").value) body.max_requests = Number($("max-requests").value);
  try {
    const run = await api("POST", "/runs", body);
    await refreshRuns();
    if (location.hash === "#run=" + run.id) await openRun(run.id);
    else location.hash = "run=" + run.id; // the hashchange opens it
  } catch (error) { say(error.message); }
}

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("token").value.trim());
    $("token").value = "";
    showApp().catch((error) => say(error.message));
  });
  $("forget").addEventListener("click", () => showLogin(""));
  $("run-form").addEventListener("submit", startRun);
  $("interrupt-run").addEventListener("click", async () => {
    try { await api("POST", "/runs/" + state.id + "/interrupt"); } catch (error) { say(error.message); }
  });
  window.addEventListener("hashchange", () => {
    const wanted = hashRun();
    if (wanted && token() && (!state || state.id !== wanted)) openRun(wanted);
  });
  setInterval(render, 250);
  // The list shows other tabs' and clients' runs of this token as they start and end.
  setInterval(() => { if (token() && !$("app").hidden) refreshRuns().catch(() => {}); }, 3000);
  if (token()) showApp().catch(() => {});
});
