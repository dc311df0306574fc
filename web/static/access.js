// The Users and ACLs panels. Shown only to a principal korvet lets list
// them (users: a super user; ACLs: DESCRIBE on the cluster), as Kafka's
// DescribeUserScramCredentials and DescribeAcls are.
"use strict";

(() => {
  const { h, api, notice, confirmInline, busy } = window.korvet;
  const $ = (id) => document.getElementById(id);

  // panel loads a list and hides its panel when the principal may not see
  // it (or this korvet has no admin API); other failures are shown.
  async function panel(id, url, render) {
    try {
      render(await api("GET", url));
      $(id).hidden = false;
    } catch (e) {
      if ([401, 403, 404, 503].includes(e.status)) {
        $(id).hidden = true;
        return;
      }
      $(id).hidden = false;
      $(id + "-body").replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 6 }, e.message)));
    }
  }

  // --- users -----------------------------------------------------------------

  const loadUsers = () => panel("users", "/api/v1/users", (res) => {
    const users = res.users || [];
    $("users-count").textContent = users.length;
    $("users-body").replaceChildren(...(users.length ? users.map((u) => {
      const actions = h("td", { class: "actions-cell" });
      actions.append(h("button", {
        type: "button", class: "link danger-text", on: {
          click: () => confirmInline(actions, "Delete user " + u.name + "?", async () => {
            try {
              await api("DELETE", "/api/v1/users/" + encodeURIComponent(u.name));
              notice("Deleted user " + u.name + ".");
              await loadUsers();
            } catch (e) {
              notice(e.message, "error");
            }
          }),
        },
      }, "delete"));
      return h("tr", { "data-user": u.name },
        h("td", { class: "name" }, u.name),
        h("td", null, (u.mechanisms || []).map((m) => m.mechanism + " (" + m.iterations + " iterations)").join(", ")),
        actions);
    }) : [h("tr", null, h("td", { class: "empty", colSpan: 3 }, "No SCRAM users."))]));
  });

  $("user-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.target;
    busy(form, async () => {
      const name = $("user-name").value.trim();
      await api("PUT", "/api/v1/users/" + encodeURIComponent(name), {
        mechanism: $("user-mechanism").value, password: $("user-password").value, iterations: Number($("user-iterations").value),
      });
      $("user-password").value = ""; // never kept in the page
      notice("Saved user " + name + ".");
      await loadUsers();
    });
  });

  // --- ACLs ------------------------------------------------------------------

  const ACL_FIELDS = ["resource_type", "resource_name", "pattern", "principal", "host", "operation", "permission"];

  const loadACLs = () => panel("acls", "/api/v1/acls", (res) => {
    const acls = res.acls || [];
    $("acls-count").textContent = acls.length;
    $("acls-body").replaceChildren(...(acls.length ? acls.map((a) => {
      const actions = h("td", { class: "actions-cell" });
      const binding = Object.fromEntries(ACL_FIELDS.map((k) => [k, a[k]]));
      actions.append(h("button", {
        type: "button", class: "link danger-text", on: {
          click: () => confirmInline(actions, "Delete this ACL?", async () => {
            try {
              await api("DELETE", "/api/v1/acls", binding);
              notice("Deleted the ACL.");
              await loadACLs();
            } catch (e) {
              notice(e.message, "error");
            }
          }),
        },
      }, "delete"));
      return h("tr", { "data-acl-principal": a.principal },
        h("td", { class: "name" }, a.principal),
        h("td", null, a.permission),
        h("td", null, a.operation),
        h("td", null, a.resource_type + " " + a.resource_name + (a.pattern && a.pattern !== "literal" ? " (" + a.pattern + ")" : "")),
        h("td", { class: "mono" }, a.host),
        actions);
    }) : [h("tr", null, h("td", { class: "empty", colSpan: 6 }, "No ACLs."))]));
  });

  $("acl-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.target;
    busy(form, async () => {
      const binding = Object.fromEntries(new FormData(form));
      if (binding.resource_type === "cluster" && !binding.resource_name) binding.resource_name = "kafka-cluster";
      await api("POST", "/api/v1/acls", binding);
      notice("Added: " + binding.principal + " " + binding.permission + " " + binding.operation + " on " + binding.resource_type + " " + binding.resource_name + ".");
      await loadACLs();
    });
  });

  // Loaded once the status view has its first answer, and again when
  // the principal changes.
  let loaded = false;
  const loadAll = () => { loadUsers(); loadACLs(); };
  document.addEventListener("korvet:status", () => {
    if (!loaded) {
      loaded = true;
      loadAll();
    }
  });
  document.addEventListener("korvet:login", () => {
    loaded = true;
    loadAll();
  });
})();
