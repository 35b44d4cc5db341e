const data = JSON.parse(document.getElementById("kperf-data").textContent);
const HARD = ["HwSlowdown","SwThermalSlowdown","HwThermalSlowdown","HwPowerBrakeSlowdown",
  "TEMP_", "PROCHOT", "VRHOT"];
function sig(x) { const a = Math.abs(x); return a >= 100 ? x.toFixed(0) : a >= 10 ?
  x.toFixed(1) : x.toFixed(2); }
function fmtTime(s) { if (s === null || s === undefined) return "-";
  if (s >= 1) return sig(s) + " s"; if (s >= 1e-3) return sig(s * 1e3) + " ms";
  if (s >= 1e-6) return sig(s * 1e6) + " \u00b5s"; return sig(s * 1e9) + " ns"; }
function fmtEnergy(j) { if (j === null || j === undefined) return "-";
  if (j >= 1) return sig(j) + " J"; if (j >= 1e-3) return sig(j * 1e3) + " mJ";
  if (j >= 1e-6) return sig(j * 1e6) + " \u00b5J"; return sig(j * 1e9) + " nJ"; }
function fmt(v, d) { return v === null || v === undefined ? "-" : (typeof v === "number" ?
  v.toFixed(d) : String(v)); }
function cell(tr, text, cls, why) { const td = tr.insertCell(); td.textContent = text;
  if (cls) td.className = cls; if (why) td.title = why; return td; }
function link(td, text, href) { const a = document.createElement("a"); a.textContent = text;
  a.href = href; td.appendChild(a); return a; }
function fill(sel, values) { for (const v of ["(all)", ...values]) {
  const o = document.createElement("option"); o.textContent = v; sel.appendChild(o); } }
function graphHref(p) {
  const q = ["machine=" + encodeURIComponent(p.machine)];
  for (const [k, v] of Object.entries(p.params)) q.push("p-" + encodeURIComponent(k) + "=" +
    encodeURIComponent(typeof v === "string" ? "'" + v + "'" : String(v)));  // asv: repr
  if (/^[0-9a-f]{7,40}$/.test(p.commit)) q.push("commits=" + p.commit.slice(0, data.hash_length));
  return "../index.html#" + encodeURIComponent(p.benchmark) + "?" + q.join("&"); }
const bench = document.getElementById("bench"), machine = document.getElementById("machine");
fill(bench, [...new Set(data.points.map(p => p.benchmark))].sort());
fill(machine, [...new Set(data.points.map(p => p.machine))].sort());
function wanted() { const m = location.hash.match(/point=([0-9a-f]{12})/);
  return m ? m[1] : null; }
function render() {
  const body = document.getElementById("rows"); body.textContent = "";
  const only = wanted();
  document.getElementById("showall").hidden = !only;
  const shown = data.points.filter(p => only ? p.point_id === only :
    (bench.value === "(all)" || p.benchmark === bench.value)
    && (machine.value === "(all)" || p.machine === machine.value));
  document.getElementById("count").textContent = shown.length + " rows" +
    (only ? " of point " + only : "");
  const empty = document.getElementById("empty");
  empty.hidden = shown.length > 0;
  empty.textContent = data.points.length === 0 ? data.empty_reason :
    (only ? "No record of this point: " + data.missing_point_reason : "");
  for (const p of shown) {
    const tr = body.insertRow(); tr.className = "point"; tr.id = "row-" + p.point_id;
    tr.dataset.point = p.point_id;
    cell(tr, p.benchmark, "l"); cell(tr, JSON.stringify(p.params), "l");
    cell(tr, p.machine, "l");
    const c = cell(tr, "", "l");
    if (data.commit_url && /^[0-9a-f]{7,40}$/.test(p.commit))
      link(c, p.commit.slice(0, data.hash_length), data.commit_url + p.commit);
    else c.textContent = p.commit.slice(0, data.hash_length);
    cell(tr, fmtTime(p.time_median_s), "", p.time_median_s === null ? "no samples" :
      "min " + fmtTime(p.time_min_s) + ", max " + fmtTime(p.time_max_s)).dataset.v =
      p.time_median_s;
    cell(tr, p.n_samples + " x " + (p.number || "?"), "", "samples x calls per sample");
    const noClock = "the telemetry gave no clock (" + (p.telemetry_backend || "none") + ")";
    cell(tr, fmt(p.sm_clock_median_mhz, 0), "", p.sm_clock_median_mhz === null ? noClock : "")
      .dataset.v = p.sm_clock_median_mhz;
    const dipped = p.sm_clock_min_mhz !== null && p.sm_clock_median_mhz !== null &&
      p.sm_clock_min_mhz < 0.9 * p.sm_clock_median_mhz;
    cell(tr, fmt(p.sm_clock_min_mhz, 0), dipped ? "warn" : "");
    cell(tr, fmt(p.mem_clock_median_mhz, 0)); cell(tr, fmt(p.temperature_max_c, 0));
    cell(tr, fmt(p.power_mean_w, 1), "", p.power_mean_w === null ? "no power reading" : "")
      .dataset.v = p.power_mean_w;
    cell(tr, fmt(p.power_limit_w, 0), "", p.power_limit_w === null ?
      (p.schema === "kperf-record-1" ? "not recorded before schema 2" : "no limit reading")
      : "");
    cell(tr, fmtEnergy(p.energy_per_call_j), "", p.energy_note).dataset.v =
      p.energy_per_call_j;
    const names = p.throttle_names.join(" ");
    const hard = HARD.some(h => names.includes(h));
    cell(tr, p.throttle_bits_or === null ? "-" : "0x" + p.throttle_bits_or.toString(16) +
      (names ? " " + names : ""), hard ? "bad" : (p.throttle_unusual ? "warn" : ""),
      p.throttle_bits_or === null ? "no throttle reading" : "");
    const tel = cell(tr, p.telemetry_backend + " (" + p.n_readings + " readings)" +
      (p.gpu_processes_note ? "; " + p.gpu_processes_note : ""), "l");
    tel.title = p.telemetry_reason + "; record " + p.source;
    if (p.gpu_shared) tel.className = "l warn";
    link(cell(tr, "", "l"), "graph", graphHref(p)).onclick = e => e.stopPropagation();
    tr.onclick = () => toggle(tr, p);
    if (only) toggle(tr, p);
  }
}
function toggle(tr, p) {
  const next = tr.nextSibling;
  if (next && next.className === "detail") { next.remove(); return; }
  const d = tr.parentNode.insertRow(tr.sectionRowIndex + 1); d.className = "detail";
  const td = d.insertCell(); td.colSpan = 16; td.className = "l";
  td.textContent = p.per_sample.map((s, i) => "#" + i + ": " + fmtTime(s.time_s) + ", SM " +
    fmt(s.sm_clock_median_mhz, 0) + " (min " + fmt(s.sm_clock_min_mhz, 0) + ") MHz, " +
    fmt(s.temperature_max_c, 0) + " C, " + fmt(s.power_mean_w, 1) + " W" +
    (s.energy_j === null || s.energy_j === undefined ? "" : ", " + fmtEnergy(s.energy_j)) +
    ", throttle " +
    (s.throttle_bits_or === null ? "-" : "0x" + s.throttle_bits_or.toString(16)) + ", " +
    s.n_readings + " readings").join("  |  ");
}
bench.onchange = render; machine.onchange = render;
document.getElementById("showall").onclick = e => { e.preventDefault();
  history.replaceState(null, "", location.pathname); render(); };
window.addEventListener("hashchange", render); render();
