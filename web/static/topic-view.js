// The topic view (#topic=NAME) and the create-topic form: partitions,
// configs with edit, the last records (text / JSON / hex), a test-record
// producer, add partitions, delete records, delete the topic. Every
// action is an /api/v1 call authorized as the same Kafka request; a
// refusal shows the API's message.
"use strict";

(() => {
  const { h, api, notice, fmtInt, base64Bytes, hex, confirmInline, lines, busy } = window.korvet;
  const $ = (id) => document.getElementById(id);
  const path = (name, rest) => "/api/v1/topics/" + encodeURIComponent(name) + (rest || "");

  let current = ""; // the topic shown
  let records = []; // its last records, kept to switch formats without a fetch

  // --- create ----------------------------------------------------------------

  $("topic-create-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.target;
    busy(form, async () => {
      const name = $("create-name").value.trim();
      const configs = Object.fromEntries(lines($("create-configs").value));
      await api("POST", "/api/v1/topics", { name, partitions: Number($("create-partitions").value), configs });
      notice("Created topic " + name + ".");
      form.reset();
      document.dispatchEvent(new CustomEvent("korvet:refresh"));
      location.hash = "#topic=" + encodeURIComponent(name);
    });
  });

  // --- view ------------------------------------------------------------------

  function showError(e) {
    const el = $("tv-error");
    el.hidden = !e;
    el.textContent = e ? e.message : "";
  }

  async function load() {
    const name = current;
    let t;
    try {
      t = await api("GET", path(name));
    } catch (e) {
      if (name === current) showError(e);
      return;
    }
    if (name !== current) return;
    showError(null);
    $("tv-id").textContent = t.id || "";
    $("tv-id").hidden = !t.id;
    renderPartitions(t.partitions || []);
    renderConfigs(t.configs || [], t.configs_error);
    await loadRecords();
  }

  function renderPartitions(parts) {
    $("tv-partitions").replaceChildren(...parts.map((p) => h("tr", { "data-partition": p.partition },
      h("td", null, "p" + p.partition),
      h("td", { class: "num" }, p.leader),
      h("td", { class: "num" }, fmtInt(p.start_offset)),
      h("td", { class: "num" }, fmtInt(p.end_offset)),
      h("td", { class: "num" }, fmtInt(p.records ?? p.end_offset - p.start_offset)))));
    if (!$("tv-count").matches(":focus")) $("tv-count").value = parts.length + 1;
    $("tv-count").min = parts.length + 1;
    const sel = $("tv-rec-partition"), keep = sel.value;
    sel.replaceChildren(h("option", { value: "" }, "all"), ...parts.map((p) => h("option", { value: String(p.partition) }, String(p.partition))));
    sel.value = parts.some((p) => String(p.partition) === keep) ? keep : "";
  }

  // Topic-level overrides can go back to the default.
  const ownSource = (src) => /topic/i.test(src || "");

  function renderConfigs(configs, why) {
    if (why) {
      // May see the topic, not its configs (DESCRIBE_CONFIGS).
      $("tv-configs").replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 3 }, why)));
      return;
    }
    $("tv-configs").replaceChildren(...configs.map((c) => {
      const input = h("input", { value: c.sensitive ? "" : c.value ?? "", placeholder: c.sensitive ? "(sensitive)" : "", readOnly: !!c.read_only, spellcheck: false, "aria-label": c.name });
      const save = h("button", { type: "button", hidden: true }, "Save");
      input.addEventListener("input", () => { save.hidden = false; });
      save.addEventListener("click", () => alter(save.parentElement, { set: { [c.name]: input.value } }, c.name + " = " + input.value));
      const reset = ownSource(c.source) && !c.read_only
        ? h("button", { type: "button", class: "link", title: "remove the topic's own value" }, "default")
        : null;
      if (reset) reset.addEventListener("click", () => alter(reset.parentElement, { delete: [c.name] }, c.name + " back to its default"));
      return h("tr", { "data-config": c.name },
        h("td", { class: "mono" }, c.name),
        h("td", { class: "cfg" }, input, save, reset),
        h("td", { class: "muted small" }, (c.source || "").toLowerCase().replaceAll("_", " ")));
    }));
  }

  async function alter(box, change, what) {
    try {
      const res = await api("PATCH", path(current, "/configs"), change);
      notice("Set " + what + ".");
      if (res && res.configs) renderConfigs(res.configs);
      else await load();
    } catch (e) {
      notice(e.message, "error");
      if (box) box.querySelector("input")?.focus();
    }
  }

  $("tv-config-add").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = $("tv-cfg-key").value.trim(), value = $("tv-cfg-value").value;
    busy(ev.target, async () => {
      await alter(null, { set: { [key]: value } }, key + " = " + value);
      ev.target.reset();
    });
  });

  // --- records ---------------------------------------------------------------

  async function loadRecords() {
    const name = current;
    const q = new URLSearchParams({ limit: "20" });
    if ($("tv-rec-partition").value !== "") q.set("partition", $("tv-rec-partition").value);
    let res;
    try {
      res = await api("GET", path(name, "/records?" + q));
    } catch (e) {
      if (name === current) $("tv-records").replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 6 }, e.message)));
      return;
    }
    if (name !== current) return;
    records = res.records || [];
    renderRecords();
  }

  const format = () => document.querySelector('input[name="tv-fmt"]:checked').value;

  // bytesOf gives a field's bytes whatever form the API chose for it.
  function bytesOf(f) {
    if (f.base64 !== undefined) return base64Bytes(f.base64);
    if (f.text !== undefined) return new TextEncoder().encode(f.text);
    return new TextEncoder().encode(JSON.stringify(f.json));
  }

  // show renders a key, header or value in the chosen format.
  function show(f, fmt) {
    if (!f || f.null) return h("span", { class: "muted" }, f && f.null ? "null (tombstone)" : "null");
    if (fmt === "hex") return h("code", { class: "hex" }, hex(bytesOf(f)));
    if (fmt === "json") {
      let v = f.json;
      if (v === undefined) {
        try {
          v = JSON.parse(new TextDecoder().decode(bytesOf(f)));
        } catch {
          v = undefined;
        }
      }
      if (v !== undefined) return h("pre", { class: "json" }, JSON.stringify(v, null, 2));
    }
    if (f.text !== undefined) return h("span", { class: "text" }, f.text);
    if (f.json !== undefined) return h("span", { class: "text" }, JSON.stringify(f.json));
    // Not UTF-8: show it decoded with replacement marks, hex is a click away.
    return h("span", { class: "text", title: "not valid UTF-8" }, new TextDecoder().decode(base64Bytes(f.base64)));
  }

  function renderRecords() {
    const fmt = format();
    if (records.length === 0) {
      $("tv-records").replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 6 }, "No records.")));
      return;
    }
    // The API lists them oldest first; the newest go on top.
    $("tv-records").replaceChildren(...records.slice().reverse().map((r) => {
      const v = r.value;
      const note = v && v.null ? null : v && v.truncated ? h("div", { class: "muted small" }, "first bytes of " + fmtInt(v.size) + " B") : v ? h("div", { class: "muted small" }, fmtInt(v.size ?? 0) + " B") : null;
      return h("tr", { "data-offset": r.offset, "data-record-partition": r.partition },
        h("td", { class: "num" }, r.partition),
        h("td", { class: "num" }, r.offset),
        h("td", { class: "small" }, r.timestamp !== undefined ? new Date(r.timestamp).toLocaleString() : ""),
        h("td", { class: "key" }, show(r.key, fmt)),
        h("td", { class: "small" }, (r.headers || []).map((hd) => h("div", null, h("b", null, hd.key), " ", show(hd.value, fmt)))),
        h("td", { class: "value" }, show(v, fmt), note));
    }));
  }

  for (const radio of document.querySelectorAll('input[name="tv-fmt"]')) radio.addEventListener("change", renderRecords);
  $("tv-rec-partition").addEventListener("change", loadRecords);
  $("tv-rec-refresh").addEventListener("click", load);

  // --- produce ---------------------------------------------------------------

  $("tv-produce").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(ev.target, async () => {
      const body = {
        partition: Number($("tv-p-partition").value || -1),
        value: $("tv-p-value").value,
        encoding: "text",
        headers: lines($("tv-p-headers").value).map(([key, value]) => ({ key, value })),
      };
      const key = $("tv-p-key").value;
      if (key !== "") body.key = key;
      const res = await api("POST", path(current, "/records"), body);
      notice("Produced to " + current + " partition " + res.partition + " at offset " + res.offset + ".");
      $("tv-p-value").value = "";
      await load();
    });
  });

  // --- partitions and records ------------------------------------------------

  $("tv-add-partitions").addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(ev.target, async () => {
      const res = await api("POST", path(current, "/partitions"), { count: Number($("tv-count").value) });
      notice(current + " has " + res.partitions + " partitions now.");
      await load();
    });
  });

  $("tv-delete-records").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.target;
    const partition = Number($("tv-dr-partition").value), before = Number($("tv-dr-before").value);
    const what = before < 0 ? "every record of partition " + partition : "the records of partition " + partition + " before offset " + before;
    form.querySelector(".confirm")?.remove();
    const wrap = h("span", { class: "confirm" });
    form.append(wrap);
    confirmInline(wrap, "Delete " + what + "?", async () => {
      try {
        const res = await api("POST", path(current, "/delete-records"), { partitions: [{ partition, before }] });
        const p = (res.partitions || [])[0];
        notice("Deleted; partition " + partition + " now starts at " + (p ? p.low_watermark : "?") + ".");
        await load();
      } catch (e) {
        notice(e.message, "error");
      } finally {
        wrap.remove();
      }
    });
  });

  // --- delete topic ----------------------------------------------------------

  $("tv-delete-confirm").addEventListener("input", () => {
    $("tv-delete-button").disabled = $("tv-delete-confirm").value !== current;
  });
  $("tv-delete").addEventListener("submit", (ev) => {
    ev.preventDefault();
    if ($("tv-delete-confirm").value !== current) return; // typed confirmation
    const name = current;
    busy(ev.target, async () => {
      const res = await api("DELETE", path(name));
      notice("Deleted topic " + (res && res.deleted ? res.deleted : name) + ".");
      location.hash = "";
      document.dispatchEvent(new CustomEvent("korvet:refresh"));
    }).then(() => {
      $("tv-delete-button").disabled = $("tv-delete-confirm").value !== current;
    });
  });

  // --- routing ---------------------------------------------------------------

  function route() {
    const m = /^#topic=(.+)$/.exec(location.hash);
    const name = m ? decodeURIComponent(m[1]) : "";
    $("topic-view").hidden = !name;
    if (!name || name === current) return;
    current = name;
    records = [];
    $("tv-name").textContent = name;
    $("topic-view").dataset.viewTopic = name;
    for (const id of ["tv-partitions", "tv-configs", "tv-records"]) $(id).replaceChildren();
    $("tv-delete-confirm").value = "";
    $("tv-delete-button").disabled = true;
    $("topic-view").scrollIntoView({ block: "start" });
    load();
  }

  $("tv-close").addEventListener("click", () => { location.hash = ""; });
  window.addEventListener("hashchange", () => {
    if (!/^#topic=/.test(location.hash)) current = "";
    route();
  });
  document.addEventListener("korvet:login", () => { if (current) load(); });
  route();
})();
