// The page of `put serve`: a canvas to brush the hole on, the settings, and the results as they arrive.
// Everything it sends is an upload or an id the server gave; the server does the reading and the sampling.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { image: null, models: [], undo: [], eraser: false, drawing: false, last: null, runs: 0 };
const UNDO_DEPTH = 30;
const RUNS_KEPT = 5;

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

// fetch that turns any failure into an Error carrying the server's one-line message
async function api(url, options = {}) {
  let response;
  try {
    response = await fetch(url, options);
  } catch (err) {
    throw new Error(`the server did not answer (${err.message}); is put serve still running?`);
  }
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`;
    try { detail = (await response.json()).detail || detail; } catch (_) { /* not JSON */ }
    throw new Error(detail);
  }
  return response;
}

function upload(url, file) {
  return api(url, {
    method: "POST", body: file,
    headers: { "Content-Type": "application/octet-stream", "X-Filename": encodeURIComponent(file.name || "upload") },
  }).then((r) => r.json());
}

// ------------------------------------------------------------------ models, test images, defaults

async function loadInfo() {
  const info = await (await api("/api/info")).json();
  state.models = info.models;
  const select = $("model");
  const compare = $("compare-models");
  for (const model of info.models) {
    const option = new Option(model.label + (model.problem ? " (unusable)" : ""), model.id);
    option.disabled = Boolean(model.problem);
    option.title = model.problem;
    select.add(option);
    const label = document.createElement("label");
    label.className = "compare-choice";
    label.title = model.problem;
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = model.id;
    box.className = "compare-model";
    box.disabled = Boolean(model.problem);
    label.append(box, swatch(model), model.label);
    compare.append(label);
  }
  // The full model first: PUT itself (trained here), else the first usable one.
  const usable = info.models.filter((m) => !m.problem);
  const preferred = usable.find((m) => m.variant === "put" && !m.official) || usable[0];
  if (preferred) select.value = preferred.id;
  const tests = $("test-image");
  for (const [preset, names] of Object.entries(info.test_images)) {
    const group = document.createElement("optgroup");
    group.label = `preset ${preset}`;
    names.forEach((name, index) => group.append(new Option(name, JSON.stringify({ preset, index }))));
    tests.append(group);
  }
  $("test-row").hidden = !tests.options.length;
  const d = info.defaults;
  $("samples").value = d.samples;
  const limits = info.limits;
  $("samples").max = limits.max_samples;
  $("limits").textContent = `Up to ${limits.max_pixels.toLocaleString("en")} pixels and ` +
    `${limits.max_upload_bytes / 2 ** 20} MiB per image; up to ${limits.max_job_pixels.toLocaleString("en")} ` +
    "pixels × samples per model and request.";
  $("seed").value = d.seed;
  $("top-k").value = d.top_k;
  $("temperature").value = d.temperature;
  $("tokens-per-step").value = d.tokens_per_step;
  $("position-rule").value = d.position_rule;
}

// A variant's colour, as in the report's figures and `dvc plots` (put/config/model.py).
function swatch(model) {
  const mark = document.createElement("span");
  mark.className = "swatch";
  mark.style.background = model.colour || "transparent";
  return mark;
}

// ------------------------------------------------------------------ the image and the hole

function showImage(described) {
  state.image = described;
  const { width, height } = described;
  const base = $("base");
  const canvas = $("mask-canvas");
  const scale = Math.min(512 / width, 512 / height);
  for (const element of [base, canvas]) {
    element.style.width = `${Math.round(width * scale)}px`;
    element.style.height = `${Math.round(height * scale)}px`;
  }
  canvas.width = width;
  canvas.height = height;
  state.undo = [];
  const brush = $("brush");
  brush.max = Math.max(8, Math.round(Math.max(width, height) / 4));
  setBrush(Math.max(1, Math.round(Math.min(width, height) / 10)));
  $("image-info").textContent = `${described.name}: ${width}×${height} pixels ` +
    "(padded to a multiple of the patch size for the model, results cropped back)";
  $("placeholder").hidden = true;
  $("stage").hidden = false;
  return new Promise((resolve) => {
    base.onload = () => {
      $("stage").dataset.image = described.id;  // the image now on the canvas
      resolve();
    };
    base.src = `/api/images/${described.id}`;
  });
}

function setBrush(size) {
  $("brush").value = size;
  $("brush-value").textContent = $("brush").value;
}

function context() {
  const ctx = $("mask-canvas").getContext("2d", { willReadFrequently: true });
  ctx.globalCompositeOperation = state.eraser ? "destination-out" : "source-over";
  ctx.strokeStyle = ctx.fillStyle = "rgb(255, 0, 0)";
  ctx.lineWidth = Number($("brush").value);
  ctx.lineCap = ctx.lineJoin = "round";
  return ctx;
}

function remember() {
  const canvas = $("mask-canvas");
  state.undo.push(canvas.getContext("2d", { willReadFrequently: true }).getImageData(0, 0, canvas.width, canvas.height));
  if (state.undo.length > UNDO_DEPTH) state.undo.shift();
}

function pointer(event) {
  const canvas = $("mask-canvas");
  const rect = canvas.getBoundingClientRect();
  return { x: (event.clientX - rect.left) * canvas.width / rect.width,
           y: (event.clientY - rect.top) * canvas.height / rect.height };
}

function stroke(from, to) {
  const ctx = context();
  ctx.beginPath();
  ctx.moveTo(from.x, from.y);
  ctx.lineTo(to.x, to.y);
  ctx.stroke();
}

function setupCanvas() {
  const canvas = $("mask-canvas");
  canvas.addEventListener("pointerdown", (event) => {
    if (!state.image) return;
    event.preventDefault();
    canvas.setPointerCapture(event.pointerId);
    remember();
    state.drawing = true;
    state.last = pointer(event);
    stroke(state.last, state.last);
  });
  canvas.addEventListener("pointermove", (event) => {
    if (!state.drawing) return;
    const point = pointer(event);
    stroke(state.last, point);
    state.last = point;
  });
  for (const name of ["pointerup", "pointercancel"]) {
    canvas.addEventListener(name, () => { state.drawing = false; });
  }
  const tool = (eraser) => () => {
    state.eraser = eraser;
    $("tool-brush").setAttribute("aria-pressed", String(!eraser));
    $("tool-eraser").setAttribute("aria-pressed", String(eraser));
  };
  $("tool-brush").onclick = tool(false);
  $("tool-eraser").onclick = tool(true);
  $("brush").oninput = () => setBrush($("brush").value);
  $("undo").onclick = () => {
    const previous = state.undo.pop();
    if (previous) canvas.getContext("2d").putImageData(previous, 0, 0);
  };
  $("clear").onclick = () => {
    remember();
    canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  };
}

// The hole as the server reads masks: a black/white PNG, white = hole (no grey: anti-aliased edges are cut at half).
function maskBlob() {
  const canvas = $("mask-canvas");
  const pixels = canvas.getContext("2d", { willReadFrequently: true }).getImageData(0, 0, canvas.width, canvas.height);
  let holes = 0;
  for (let i = 0; i < pixels.data.length; i += 4) {
    const hole = pixels.data[i + 3] >= 128;
    holes += hole;
    pixels.data[i] = pixels.data[i + 1] = pixels.data[i + 2] = hole ? 255 : 0;
    pixels.data[i + 3] = 255;
  }
  if (!holes) throw new Error("draw a hole on the image first (or upload a mask)");
  if (holes === canvas.width * canvas.height) {
    throw new Error("the hole covers the whole image: leave some of it unpainted (the known pixels guide the model)");
  }
  const out = document.createElement("canvas");
  out.width = canvas.width;
  out.height = canvas.height;
  out.getContext("2d").putImageData(pixels, 0, 0);
  return new Promise((resolve) => out.toBlob((blob) => resolve(new File([blob], "drawn-mask.png")), "image/png"));
}

// A mask file read by the server (its polarity, its size checked), drawn onto the canvas to edit further.
async function loadMaskFile(file) {
  if (!state.image) throw new Error("load an image before its mask");
  const polarity = $("polarity").value;
  const mask = await upload(`/api/masks?image=${state.image.id}&polarity=${polarity}`, file);
  const picture = new Image();
  await new Promise((resolve, reject) => {
    picture.onload = resolve;
    picture.onerror = () => reject(new Error("the server's mask image did not load"));
    picture.src = `/api/masks/${mask.id}`;
  });
  const canvas = $("mask-canvas");
  const scratch = document.createElement("canvas");
  scratch.width = canvas.width;
  scratch.height = canvas.height;
  const sctx = scratch.getContext("2d", { willReadFrequently: true });
  sctx.drawImage(picture, 0, 0);
  const pixels = sctx.getImageData(0, 0, canvas.width, canvas.height);
  for (let i = 0; i < pixels.data.length; i += 4) {
    const hole = pixels.data[i] > 127;
    pixels.data[i] = 255;
    pixels.data[i + 1] = pixels.data[i + 2] = 0;
    pixels.data[i + 3] = hole ? 255 : 0;
  }
  remember();
  canvas.getContext("2d").putImageData(pixels, 0, 0);
}

// ------------------------------------------------------------------ running and the results

function settings() {
  const number = (id) => Number($(id).value);
  const steps = $("steps").value.trim();
  return {
    samples: number("samples"), seed: number("seed"), top_k: number("top-k"), temperature: number("temperature"),
    tokens_per_step: number("tokens-per-step"), steps: steps === "" ? null : Number(steps),
    position_rule: $("position-rule").value, deterministic: $("deterministic").checked,
  };
}

function resultUrl(job, index) {
  return `/api/jobs/${job}/results/${index}` + ($("raw").checked ? "?raw=true" : "");
}

function fileName(name) {
  return $("raw").checked ? name.replace(/\.png$/, "_raw.png") : name;
}

function seconds(value) {
  return value == null ? "" : `${value.toFixed(2)} s`;
}

async function start(models) {
  clearError();
  if (!state.image) throw new Error("load an image first");
  if (!models.length) throw new Error("choose a model");
  const mask = await upload(`/api/masks?image=${state.image.id}&polarity=hole-white`, await maskBlob());
  const body = { mask: mask.id, models, ...settings() };
  const { jobs } = await (await api("/api/jobs", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  })).json();
  const run = document.createElement("div");
  run.className = "run";
  run.dataset.run = ++state.runs;
  const head = document.createElement("div");
  head.className = "run-head";
  head.textContent = `${state.image.name}, seed ${body.seed}, N = ${body.samples}` +
    (jobs.length > 1 ? `, ${jobs.length} variants compared` : "");
  // One grid for the whole run: a row per model, a column per sample, so that compared variants line up.
  const grid = document.createElement("div");
  grid.className = "compare-grid";
  grid.style.setProperty("--samples", body.deterministic ? 1 : body.samples);
  run.append(head, grid);
  const results = $("results");
  results.prepend(run);
  while (results.children.length > RUNS_KEPT) results.lastChild.remove();
  const finished = await Promise.all(jobs.map((job) => follow(job, grid)));
  if (finished.every(Boolean)) {
    const zip = document.createElement("a");
    zip.className = "zip";
    zip.href = "/api/zip?" + jobs.map((job) => `jobs=${job}`).join("&");
    zip.download = "put_results.zip";
    zip.textContent = "all as zip";
    head.append(" · ", zip);
  }
}

// Polls one request until it is done; true when it produced its results. Its row of the run's grid: the model
// (in its variant's colour), the progress, then the results, one per column.
async function follow(jobId, grid) {
  const panel = document.createElement("div");
  panel.className = "job";
  panel.dataset.job = jobId;
  const label = document.createElement("div");
  label.className = "job-head";
  const title = document.createElement("h3");
  const progress = document.createElement("progress");
  const status = document.createElement("p");
  status.className = "status";
  label.append(title, progress, status);
  panel.append(label);
  grid.append(panel);
  for (;;) {
    const job = await (await api(`/api/jobs/${jobId}`)).json();
    title.replaceChildren(swatch(job.model), job.model.label);
    panel.style.setProperty("--variant", job.model.colour || "var(--line)");
    if (job.state === "queued") {
      status.textContent = `waiting: ${job.position} request(s) ahead for this model`;
    } else if (job.state === "running") {
      if (job.total) {
        progress.max = job.total;
        progress.value = job.done;
        status.textContent = `sampling: step ${job.done} of ${job.total}`;
      } else {
        status.textContent = "loading the model and encoding the image";
      }
    } else if (job.state === "failed" || job.state === "cancelled") {
      progress.remove();
      status.textContent = job.state === "failed" ? `failed: ${job.error}` : job.error;
      status.classList.add("failed");
      showError(job.error);
      return false;
    } else {
      progress.max = 1;
      progress.value = 1;
      status.textContent = `${job.results} result(s) in ${seconds(job.sample_seconds)}` +
        (job.load_seconds > 0.01 ? ` (model loaded in ${seconds(job.load_seconds)})` : "") +
        (job.waited_seconds > 0.01 ? `, after ${seconds(job.waited_seconds)} in the queue` : "");
      job.names.forEach((name, index) => panel.append(figure(jobId, name, index)));
      return true;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

function figure(jobId, name, index) {
  const item = document.createElement("figure");
  item.className = "result";
  item.dataset.index = index;
  item.dataset.name = name;
  const picture = document.createElement("img");
  picture.alt = name;
  picture.src = resultUrl(jobId, index);
  picture.style.width = $("base").style.width;
  const link = document.createElement("a");
  link.href = picture.src;
  link.download = fileName(name);
  link.textContent = link.download;
  const caption = document.createElement("figcaption");
  caption.append(link);
  item.append(picture, caption);
  return item;
}

function refreshResults() {
  for (const item of document.querySelectorAll("figure.result")) {
    const jobId = item.closest(".job").dataset.job;
    const url = resultUrl(jobId, item.dataset.index);
    item.querySelector("img").src = url;
    const link = item.querySelector("a");
    link.href = url;
    link.download = link.textContent = fileName(item.dataset.name);
  }
}

// ------------------------------------------------------------------ wiring

function guarded(action) {
  return async (...args) => {
    try {
      await action(...args);
    } catch (err) {
      showError(err.message);
    }
  };
}

window.addEventListener("DOMContentLoaded", guarded(async () => {
  setupCanvas();
  $("image-file").onchange = guarded(async (event) => {
    const file = event.target.files[0];
    event.target.value = "";
    if (!file) return;
    clearError();
    await showImage(await upload("/api/images", file));
  });
  $("load-test").onclick = guarded(async () => {
    clearError();
    const choice = $("test-image").value;
    if (!choice) throw new Error("this server lists no test images");
    await showImage(await (await api("/api/images/test", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: choice,
    })).json());
  });
  $("mask-file").onchange = guarded(async (event) => {
    const file = event.target.files[0];
    event.target.value = "";
    if (!file) return;
    clearError();
    await loadMaskFile(file);
  });
  $("run").onclick = guarded(() => start([$("model").value].filter(Boolean)));
  $("compare").onclick = guarded(() => {
    const chosen = [...document.querySelectorAll(".compare-model:checked")].map((box) => box.value);
    if (chosen.length < 2) throw new Error("tick two or more variants to compare");
    return start(chosen);
  });
  $("raw").onchange = refreshResults;
  await loadInfo();
}));
