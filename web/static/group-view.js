// The group view (#group=NAME): members, offsets and lag, lag over time
// as an inline SVG sparkline (the API's lag_history), reset offsets
// (a dry run first, then apply) and delete the group. Both are refused by
// korvet while the group has members, as Kafka's tools are.
"use strict";

(() => {
  const { h, api, notice, fmtInt, confirmInline, busy } = window.korvet;
  const $ = (id) => document.getElementById(id);
  const path = (name, rest) => "/api/v1/groups/" + encodeURIComponent(name) + (rest || "");
  const REFRESH_MS = 10000; // lag_history is sampled every 30 s; offsets move faster

  let current = "";
  let plan = null; // the reset the last dry run previewed
  let timer = 0;

  function showError(e) {
    $("gv-error").hidden = !e;
    $("gv-error").textContent = e ? e.message : "";
  }

  async function load() {
    clearTimeout(timer);
    const name = current;
    if (!name) return;
    try {
      const g = await api("GET", path(name));
      if (name !== current) return;
      showError(null);
      render(g);
    } catch (e) {
      if (name === current) showError(e);
    }
    if (name === current && !document.hidden) timer = setTimeout(load, REFRESH_MS);
  }

  function render(g) {
    const members = g.members || [], offsets = g.offsets || [];
    const state = (g.state || "?").toLowerCase();
    $("gv-state").replaceChildren(h("span", { class: "pill " + (state === "stable" ? "ok" : state === "dead" ? "bad" : ""), "data-field": "state" }, state),
      g.type ? h("span", { class: "muted small" }, " " + g.type + (g.protocol ? " · " + g.protocol : "")) : null);
    $("gv-members").replaceChildren(...(members.length ? members.map((m) => h("tr", null,
      h("td", { class: "mono small" }, m.member_id),
      h("td", null, m.client_id || ""),
      h("td", { class: "mono small" }, m.host || ""),
      h("td", null, (m.assignments || []).map((a) => a.topic + "[" + (a.partitions || []).join(",") + "]").join(" ") || "—")))
      : [h("tr", null, h("td", { class: "empty", colSpan: 4 }, "No members: offsets can be reset."))]));
    $("gv-offsets").replaceChildren(...(offsets.length ? offsets.map((o) => h("tr", { "data-offset-topic": o.topic, "data-offset-partition": o.partition },
      h("td", null, o.topic),
      h("td", { class: "num" }, o.partition),
      h("td", { class: "num", "data-field": "committed" }, o.committed < 0 ? "—" : fmtInt(o.committed)),
      h("td", { class: "num" }, fmtInt(o.end_offset)),
      h("td", { class: "num" }, fmtInt(o.lag))))
      : [h("tr", null, h("td", { class: "empty", colSpan: 5 }, "No committed offsets."))]));
    const total = offsets.reduce((n, o) => n + Math.max(0, o.lag || 0), 0);
    $("gv-lag-now").textContent = "now " + fmtInt(total);
    sparkline(g.lag_history || []);
    // The reset form offers the group's topics; keep the user's choice.
    const sel = $("gv-r-topic"), keep = sel.value;
    const topics = [...new Set(offsets.map((o) => o.topic))].sort();
    sel.replaceChildren(...topics.map((t) => h("option", { value: t }, t)));
    if (topics.includes(keep)) sel.value = keep;
  }

  function sparkline(points) {
    $("gv-spark").replaceChildren(points.length < 2
      ? h("span", { class: "muted small" }, "collecting samples (one every 30 s)…")
      : window.korvet.sparkline(points));
  }

  // --- reset -----------------------------------------------------------------

  // resetBody reads the form into the API's request.
  function resetBody() {
    const to = $("gv-r-to").value, at = $("gv-r-at").value.trim();
    const body = { topic: $("gv-r-topic").value, to };
    if (!body.topic) throw new Error("the group has no committed offsets on a topic to reset");
    const parts = $("gv-r-partitions").value.trim();
    if (parts && parts !== "all") {
      body.partitions = parts.split(",").map((s) => {
        const n = Number(s.trim());
        if (!Number.isInteger(n) || n < 0) throw new Error("partitions: \"" + s.trim() + "\" is not a partition number");
        return n;
      });
    }
    if (to === "timestamp") {
      const ms = /^\d+$/.test(at) ? Number(at) : Date.parse(at);
      if (!Number.isFinite(ms)) throw new Error("timestamp: give milliseconds since 1970 or a date like 2026-01-31T12:00");
      body.timestamp = ms;
    } else if (to === "offset") {
      if (!/^\d+$/.test(at)) throw new Error("offset: give the offset to reset to");
      body.offset = Number(at);
    }
    return body;
  }

  function hidePlan() {
    plan = null;
    $("gv-r-plan").hidden = true;
  }

  $("gv-reset").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(ev.target, async () => {
      const body = resetBody();
      const res = await api("POST", path(current, "/reset-offsets"), { ...body, dry_run: true });
      plan = body;
      $("gv-r-plan-body").replaceChildren(...(res.offsets || []).map((o) => h("tr", { "data-plan-partition": o.partition },
        h("td", null, o.topic), h("td", { class: "num" }, o.partition), h("td", { class: "num" }, fmtInt(o.offset)))));
      $("gv-r-plan").hidden = false;
      $("gv-r-apply").focus();
    });
  });
  for (const id of ["gv-r-topic", "gv-r-to", "gv-r-at", "gv-r-partitions"]) $(id).addEventListener("input", hidePlan);
  $("gv-r-cancel").addEventListener("click", hidePlan);
  $("gv-r-apply").addEventListener("click", () => {
    if (!plan) return;
    const body = plan;
    busy($("gv-r-plan"), async () => {
      const res = await api("POST", path(current, "/reset-offsets"), { ...body, dry_run: false });
      hidePlan();
      notice("Reset " + (res.offsets || []).length + " partition(s) of " + body.topic + " for group " + current + ".");
      await load();
    });
  });

  // --- delete ----------------------------------------------------------------

  $("gv-delete").addEventListener("click", () => {
    const name = current;
    confirmInline($("gv-delete-actions"), "Delete group " + name + " and its committed offsets?", async () => {
      try {
        await api("DELETE", path(name));
        notice("Deleted group " + name + ".");
        location.hash = "";
        document.dispatchEvent(new CustomEvent("korvet:refresh"));
      } catch (e) {
        notice(e.message, "error");
      }
    });
  });

  // --- routing ---------------------------------------------------------------

  function route() {
    const m = /^#group=(.+)$/.exec(location.hash);
    const name = m ? decodeURIComponent(m[1]) : "";
    $("group-view").hidden = !name;
    if (!name) {
      current = "";
      clearTimeout(timer);
      return;
    }
    if (name === current) return;
    current = name;
    hidePlan();
    $("gv-name").textContent = name;
    $("group-view").dataset.viewGroup = name;
    for (const id of ["gv-members", "gv-offsets", "gv-spark", "gv-r-topic"]) $(id).replaceChildren();
    $("group-view").scrollIntoView({ block: "start" });
    load();
  }

  $("gv-close").addEventListener("click", () => { location.hash = ""; });
  window.addEventListener("hashchange", route);
  document.addEventListener("korvet:login", load);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) load(); });
  route();
})();
