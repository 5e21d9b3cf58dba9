// Minimal behaviour: confirm destructive actions, follow queued jobs until they finish.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var message = event.target.getAttribute("data-confirm");
    if (message && !window.confirm(message)) { event.preventDefault(); }
  });

  function describe(job) {
    var p = job.progress || {};
    var parts = [job.kind + " job " + job.id + ": " + job.status];
    if (p.phase) { parts.push(p.phase); }
    if (p.total) { parts.push((p.done || 0) + " of " + p.total); }
    if (p.loss !== undefined && p.loss !== null) { parts.push("loss " + Number(p.loss).toFixed(3)); }
    if (job.error) { parts.push(job.error); }
    if (job.status === "done" && job.result) {
      if (job.result.files) {
        parts.push(job.result.files.map(function (f) { return f.document + " " + f.status + " (" + f.chunks + " chunks)" + (f.detail ? ": " + f.detail : ""); }).join(", "));
      } else if (job.result.version) {
        parts.push("version " + job.result.version + (job.result.activated ? " (active)" : " (not activated)"));
      }
    }
    return parts.join(" · ");
  }

  function follow(box) {
    var url = box.getAttribute("data-job-url");
    var text = box.querySelector(".job-text");
    var bar = box.querySelector(".progress div");
    function poll() {
      fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" })
        .then(function (response) { return response.json().then(function (body) { return [response.status, body]; }); })
        .then(function (pair) {
          var status = pair[0], job = pair[1];
          if (status !== 200) { text.textContent = job.error || ("error " + status); return; }
          text.textContent = describe(job);
          box.setAttribute("data-status", job.status);
          var p = job.progress || {};
          if (bar && p.total) { bar.style.width = Math.round(100 * (p.done || 0) / p.total) + "%"; }
          if (job.status === "done" || job.status === "failed") {
            if (bar) { bar.style.width = "100%"; }
            if (box.hasAttribute("data-reload")) { window.setTimeout(function () { window.location.replace(box.getAttribute("data-reload")); }, 600); }
            return;
          }
          window.setTimeout(poll, 1000);
        })
        .catch(function () { window.setTimeout(poll, 2000); });
    }
    poll();
  }

  document.querySelectorAll("[data-job-url]").forEach(follow);

  var kind = document.getElementById("source-kind");
  if (kind) {
    var sync = function () {
      document.querySelectorAll("[data-kind]").forEach(function (el) { el.hidden = el.getAttribute("data-kind") !== kind.value; });
    };
    kind.addEventListener("change", sync);
    sync();
  }
})();
