// The page's log-in form: a korvet user and password, kept in this tab's
// sessionStorage and sent as Basic on every API call (kit.js api). The
// status view asks for it when the API answers 401.
"use strict";

(() => {
  const { login, api, notice } = window.korvet;
  const $ = (id) => document.getElementById(id);

  function showHeader() {
    const logged = !!login.get();
    $("login-open").hidden = logged;
    $("logout").hidden = !logged;
  }

  function open(message) {
    $("login").hidden = false;
    const err = $("login-error");
    err.textContent = message || "";
    err.hidden = !message;
    $("login-user").focus();
  }

  function close() {
    $("login").hidden = true;
    $("login-error").hidden = true;
  }

  // Tells the other views the principal changed.
  const changed = () => {
    showHeader();
    document.dispatchEvent(new CustomEvent("korvet:refresh"));
    document.dispatchEvent(new CustomEvent("korvet:login"));
  };

  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const user = $("login-user").value.trim();
    const password = $("login-password").value;
    login.set(user, password);
    try {
      await api("GET", "/api/v1/status"); // the gate checks the password
    } catch (e) {
      if (e.status === 401) {
        login.clear();
        showHeader();
        open(e.message);
        return;
      }
      // Logged in, but not allowed to see the status: still a login.
    }
    $("login-password").value = "";
    close();
    notice("Logged in as " + user + ".");
    changed();
  });

  $("login-open").addEventListener("click", () => open());
  $("login-cancel").addEventListener("click", close);
  $("logout").addEventListener("click", () => {
    login.clear();
    notice("Logged out.");
    changed();
  });
  document.addEventListener("korvet:unauthorized", (ev) => {
    // A stored login that stopped working (password changed) is dropped,
    // and korvet's reason shown; a first visit just gets the form.
    const stale = !!login.get();
    login.clear();
    showHeader();
    open(stale ? ev.detail.message : "");
  });
  showHeader();
})();
