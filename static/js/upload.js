// Upload page: refuse an over-size file before sending it, and show the upload's own progress.
// The form posts with htmx; after the upload the server sends the browser to the import's page,
// whose progress bar follows the import itself.
(() => {
  const $ = (id) => document.getElementById(id);
  const fmt = (bytes) => {
    const units = ["bytes", "KB", "MB", "GB"];
    let i = 0;
    while (bytes >= 1024 && i < units.length - 1) { bytes /= 1024; i += 1; }
    return `${i ? bytes.toFixed(1) : bytes} ${units[i]}`;
  };
  const showError = (text) => {
    const error = $("upload-error");
    error.textContent = text;
    error.hidden = false;
  };
  const tooBig = (input) => {
    const file = input && input.files && input.files[0];
    const max = Number(input && input.dataset.maxBytes);
    return file && max && file.size > max ? `${file.name} is ${fmt(file.size)}; the limit is ${fmt(max)}.` : "";
  };

  document.addEventListener("change", (event) => {
    if (event.target.closest("#upload-form") && event.target.type === "file") {
      const problem = tooBig(event.target);
      if (problem) showError(problem);
      else $("upload-error").hidden = true;
    }
  });
  document.addEventListener("htmx:beforeRequest", (event) => {
    if (event.detail.elt.id !== "upload-form") return;
    const problem = tooBig(event.detail.elt.querySelector("input[type=file]"));
    if (problem) {
      event.preventDefault();  // nothing is sent
      showError(problem);
      return;
    }
    $("upload-progress").hidden = false;
    $("upload-button").disabled = true;
  });
  document.addEventListener("htmx:xhr:progress", (event) => {
    if (event.target.id !== "upload-form" || !event.detail.lengthComputable) return;
    const percent = Math.round((100 * event.detail.loaded) / event.detail.total);
    $("upload-progress").querySelector("progress").value = percent;
    $("upload-progress-text").textContent =
      percent < 100 ? `Uploading… ${fmt(event.detail.loaded)} of ${fmt(event.detail.total)}` : "Uploaded; starting the import…";
  });
  document.addEventListener("htmx:responseError", (event) => {
    if (event.detail.elt.id !== "upload-form") return;
    $("upload-progress").hidden = true;
    $("upload-button").disabled = false;
    showError(`Not uploaded: ${event.detail.xhr.responseText || event.detail.xhr.statusText}`);
  });
})();
