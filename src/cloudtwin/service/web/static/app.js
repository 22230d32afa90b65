// cloudtwin pages: draw the figures the server embedded, start a job and follow it.
"use strict";

function drawFigures() {
  for (const node of document.querySelectorAll("[data-plot]")) {
    const data = document.getElementById("figure-" + node.dataset.plot);
    if (!data || typeof Plotly === "undefined") continue;
    const fig = JSON.parse(data.textContent);
    Plotly.newPlot(node, fig.data, fig.layout, { displaylogo: false, responsive: true });
  }
}

// The frame every plot of the pages shares (plots.frame: title under the toolbar, legend
// outside the plot area), embedded by the page that draws plots of its own.
function framed(title, extra) {
  const node = document.getElementById("plot-frame");
  const base = node ? JSON.parse(node.textContent) : {};
  return { ...base, ...extra, title: { ...base.title, text: title } };
}

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text;
  return td;
}

const ROWS = [
  ["aggregate (Gbps)", (r) => r.aggregate_gbps.toFixed(1)],
  ["per-flow p50 (Gbps)", (r) => r.per_flow_gbps.p50.toFixed(2)],
  ["FCT p99 (ms)", (r) => (1e3 * r.fct_s.p99).toFixed(3)],
  ["completion time (ms)", (r) => (1e3 * r.completion_s).toFixed(3)],
  ["utilization", (r) => r.utilization.toFixed(3)],
];

function showComparison(result) {
  const names = Object.keys(result.results);
  const table = document.createElement("table");
  table.id = "job-table";
  const head = document.createElement("tr");
  head.appendChild(cell("metric"));
  names.forEach((n) => head.appendChild(cell(n)));
  table.appendChild(head);
  for (const [label, get] of ROWS) {
    const tr = document.createElement("tr");
    tr.appendChild(cell(label));
    names.forEach((n) => tr.appendChild(cell(get(result.results[n]))));
    table.appendChild(tr);
  }
  const ratio = document.createElement("tr");
  ratio.appendChild(cell("aggregate vs " + names[0]));
  names.forEach((n) => ratio.appendChild(cell(result.ratios[n] === null ? "-" : result.ratios[n].toFixed(2) + "x")));
  table.appendChild(ratio);
  document.getElementById("job-result").replaceChildren(table);
  Plotly.newPlot("job-plot", [{ type: "bar", x: names, y: names.map((n) => result.results[n].aggregate_gbps),
    marker: { color: names.map((n) => COLOURS[n] || "#17becf") } }],
    framed(result.scenario + ": aggregate throughput", { yaxis: { title: { text: "Gbps" }, automargin: true } }),
    { displaylogo: false });
}

const COLOURS = { ecmp: "#1f77b4", "ecmp-qp": "#9467bd", adaptive: "#2ca02c", spray: "#8c564b", pinning: "#ff7f0e" };

function showSweep(result) {
  const names = Object.keys(result.results);
  const table = document.createElement("table");
  table.id = "job-table";
  const head = document.createElement("tr");
  head.appendChild(cell("size (bytes)"));
  names.forEach((n) => head.appendChild(cell(n + " busbw (GB/s)")));
  table.appendChild(head);
  result.results[names[0]].forEach((row, i) => {
    const tr = document.createElement("tr");
    tr.appendChild(cell(String(row.size_bytes)));
    names.forEach((n) => tr.appendChild(cell(result.results[n][i].busbw_GBps.toFixed(2))));
    table.appendChild(tr);
  });
  document.getElementById("job-result").replaceChildren(table);
  const traces = names.map((n) => ({ type: "scatter", mode: "lines+markers", name: n,
    x: result.results[n].map((r) => r.size_bytes), y: result.results[n].map((r) => r.busbw_GBps),
    line: { color: COLOURS[n] } }));
  Plotly.newPlot("job-plot", traces, framed(result.scenario + ": " + result.op + " busbw against message size", {
    xaxis: { type: "log", title: { text: "message size (bytes)" }, automargin: true },
    yaxis: { title: { text: "busbw (GB/s)" }, automargin: true } }), { displaylogo: false });
}

function showEvaluation(result) {
  const p = document.createElement("p");
  const a = document.createElement("a");
  a.href = "/runs/" + result.run_id;
  a.textContent = "run " + result.run_id;
  p.append("Stored as ", a, ". Recommendation: " + result.recommendation + ".");
  document.getElementById("job-result").replaceChildren(p);
  refreshRuns();
}

// The runs table as the server renders it now (a stored job's run appears without a reload).
async function refreshRuns() {
  const table = document.querySelector("#runs-table tbody");
  if (!table) return;
  const response = await fetch(location.pathname + location.search);
  const page = new DOMParser().parseFromString(await response.text(), "text/html");
  const fresh = page.querySelector("#runs-table tbody");
  if (fresh) table.replaceWith(fresh);
}

async function follow(jobId) {
  const state = document.getElementById("job-state");
  for (;;) {
    const response = await fetch("/api/jobs/" + jobId);
    const job = await response.json();
    state.textContent = job.state;
    document.getElementById("job-progress").value = job.progress;
    document.getElementById("job-stage").textContent = job.stage || "";
    if (job.state === "done") {
      ({ compare: showComparison, "nccl-tests": showSweep, evaluate: showEvaluation })[job.kind](job.result);
      return;
    }
    if (job.state === "failed" || job.state === "cancelled") {
      const error = document.getElementById("job-error");
      error.textContent = job.error || job.state;
      error.hidden = false;
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

async function startJob(event) {
  event.preventDefault();
  const form = event.target;
  const token = document.getElementById("token").value.trim();
  localStorage.setItem("cloudtwin-token", token);
  const body = {
    kind: form.kind.value,
    example: form.example.value,
    strategies: [...form.querySelectorAll("input[name=strategies]:checked")].map((i) => i.value),
  };
  if (form.seed.value !== "") body.seed = Number(form.seed.value);
  if (body.kind === "nccl-tests") Object.assign(body, { minbytes: "1M", maxbytes: "1G", stepfactor: 4 });
  const box = document.getElementById("job");
  const error = document.getElementById("job-error");
  const state = document.getElementById("job-state");
  box.hidden = false;
  error.hidden = true;
  document.getElementById("job-title").textContent = body.kind + " " + body.example;
  state.textContent = "starting";
  document.getElementById("job-result").replaceChildren();
  const response = await fetch("/api/jobs", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) {
    state.textContent = token ? "refused" : "refused (no token)";
    error.textContent = answer.error ? answer.error.message : response.statusText;
    error.hidden = false;
    return;
  }
  document.getElementById("job-title").textContent = "job " + answer.job_id + " (" + answer.kind + " " + answer.scenario + ")";
  follow(answer.job_id);
}

function compareSelected() {
  const ids = [...document.querySelectorAll("input.pick:checked")].map((i) => i.value);
  if (ids.length) window.location = "/compare?runs=" + ids.join(",");
}

document.addEventListener("DOMContentLoaded", () => {
  drawFigures();
  const form = document.getElementById("job-form");
  if (form) {
    document.getElementById("token").value = localStorage.getItem("cloudtwin-token") || "";
    form.addEventListener("submit", startJob);
    document.getElementById("compare-button").addEventListener("click", compareSelected);
  }
});
