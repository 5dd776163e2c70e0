// The approvals view: polls /api/state and updates without reloading. Decisions carry the CSRF token
// and the hash of the request as shown, so a request that changed cannot be approved by mistake.
"use strict";

import {el, getJSON, polling, postJSON, setStatus, when} from "./dom.js";

export function pendingBadge() {
  const badge = document.getElementById("pending-badge");
  async function tick() {
    try {
      const state = await getJSON("/api/state");
      badge.textContent = String(state.pending.length);
      badge.hidden = state.pending.length === 0;
    } catch (err) { /* the view in front says so */ }
  }
  tick();
  setInterval(tick, 3000);
}

export function approvalsView(main) {
  let version = -1;
  const pending = el("div", {id: "pending"});
  const body = el("tbody");
  main.append(
    el("p", {class: "hint", text: "Each request below would leave the sandbox. It runs once, from the host, only " +
      "if you approve it. Text written by the model is shown inside the framed boxes, with invisible and " +
      "control characters made visible; the buttons are never part of it."}),
    el("section", {},
       el("h2", {}, "Pending ", el("span", {id: "pending-count", text: "0"})),
       el("p", {id: "no-pending", class: "empty", text: "Nothing is waiting."}),
       pending),
    el("section", {},
       el("h2", {text: "History"}),
       el("table", {id: "history"},
          el("thead", {}, el("tr", {}, ...["#", "tool", "key", "status", "decided by", "reason / rule", "result"]
            .map(h => el("th", {text: h})))),
          body)));

  async function decide(request, decision, reasonInput, errorLine, scopeSelect) {
    errorLine.textContent = "";
    const payload = {id: request.id, decision, reason: reasonInput.value, hash: request.hash};
    if (scopeSelect.value !== "once") {
      const rule = request.grant[decision];
      if (rule === null) { errorLine.textContent = request.grant[decision + "_why"]; return; }
      payload.grant = scopeSelect.value;
      payload.rule = rule;                               // the rule shown; the server derives it again
    }
    const {ok, data} = await postJSON("/api/decide", payload);
    if (!ok) { errorLine.textContent = data.error; return; }
    await refresh().catch(err => setStatus(String(err.message || err), true));
  }

  // The scope of a decision: this request only, or a grant whose derived rule is shown (as text) before
  // the button that makes it is pressed.
  function scopeChoice(request, approveButton, denyButton) {
    const rules = el("div", {class: "grant-rules", "data-role": "grant-rules", hidden: true},
      el("div", {class: "preview-label", text: "a grant decides later requests this rule covers, without asking:"}),
      el("pre", {class: "grant-rule", "data-role": "grant-approve",
                 text: "approve: " + (request.grant.approve || "no grant possible: " + request.grant.approve_why)}),
      el("pre", {class: "grant-rule", "data-role": "grant-deny",
                 text: "deny: " + (request.grant.deny || "no grant possible: " + request.grant.deny_why)}));
    const select = el("select", {"data-role": "scope"},
      el("option", {value: "once", text: "this request only"}),
      el("option", {value: "run", text: "and a grant for this run"}),
      el("option", {value: "session", text: "and a grant for this session"}));
    select.addEventListener("change", () => {
      const grant = select.value !== "once";
      rules.hidden = !grant;
      approveButton.textContent = "Approve #" + request.id + (grant ? " and grant the rule shown" : "");
      denyButton.textContent = "Deny #" + request.id + (grant ? " and deny by the rule shown" : "");
      approveButton.disabled = grant && request.grant.approve === null;
    });
    return {select, rules};
  }

  function card(request) {
    const reason = el("input", {type: "text", "data-role": "reason",
                                placeholder: "reason (optional; a denial's reason is passed to the model)"});
    const errorLine = el("div", {class: "error-line"});
    const approveButton = el("button", {class: "approve", "data-role": "approve", text: "Approve #" + request.id});
    const denyButton = el("button", {class: "deny", "data-role": "deny", text: "Deny #" + request.id});
    const scope = scopeChoice(request, approveButton, denyButton);
    approveButton.addEventListener("click", () => decide(request, "approve", reason, errorLine, scope.select));
    denyButton.addEventListener("click", () => decide(request, "deny", reason, errorLine, scope.select));
    return el("article", {class: "request", id: "request-" + request.id, "data-id": String(request.id)},
      el("h3", {text: "#" + request.id + "  " + request.tool}),
      el("div", {class: "meta", text: "session " + request.session + " · key " + request.key + " · asked " +
                                     when(request.created_at) + " · hash " + request.hash.slice(0, 12)}),
      el("div", {class: "preview-frame"},
         el("div", {class: "preview-label", text: "what will run if you approve (written by the model)"}),
         el("pre", {class: "preview", text: request.preview})),
      el("div", {class: "actions"}, reason, scope.select, approveButton, denyButton),
      scope.rules,
      errorLine);
  }

  function render(state) {
    const wanted = new Set(state.pending.map(r => "request-" + r.id));
    for (const node of Array.from(pending.children)) if (!wanted.has(node.id)) node.remove();
    for (const request of state.pending) {
      if (!document.getElementById("request-" + request.id)) pending.appendChild(card(request));
    }
    document.getElementById("pending-count").textContent = String(state.pending.length);
    document.getElementById("no-pending").hidden = state.pending.length > 0;
    body.replaceChildren(...state.history.map(r => el("tr", {id: "history-" + r.id, "data-status": r.status},
      el("td", {text: String(r.id)}), el("td", {text: r.tool}), el("td", {text: r.key}),
      el("td", {class: "status-cell", text: r.status}),
      el("td", {"data-role": "decided-by", text: (r.grant_id === null ? r.decided_by
                                                   : (r.status === "denied" ? "denied" : "approved") +
                                                     " by grant G" + r.grant_id) + " " + when(r.decided_at)}),
      el("td", {text: r.reason + (r.rule ? " (rule " + r.rule + ")" : "")}),
      el("td", {}, el("pre", {text: r.result === null ? "" : r.result})))));
  }

  async function refresh() {
    const state = await getJSON("/api/state");
    if (state.version !== version) {
      version = state.version;
      render(state);
    }
  }

  return polling(refresh, 1000);
}
