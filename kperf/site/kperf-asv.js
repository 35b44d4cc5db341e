/* kperf's additions to asv's pages (kperf/site/asv_pages.py loads this after asv's own
 * scripts and patches graphdisplay.js to call window.kperfPoint):
 * - a graph point's tooltip also shows its SM clock, power, throttle state, sample spread
 *   and energy per call (from kperf/points.json, made from the records);
 * - a click on a point opens its rows on kperf/telemetry.html (points without a record
 *   keep asv's behaviour: the commit);
 * - blanks explained: benchmarks without results, an empty regressions list;
 * - each step on the regressions page says its cause, as the gate would (kperf/steps.json,
 *   made by kperf/site/steps.py: time and energy per call, clock and power either side,
 *   whose the clock change is).
 * Everything from data is escaped before it reaches the tooltip's HTML. */
(function () {
  "use strict";
  var points = null;
  var requested = false;

  function load() {
    if (requested) return;
    requested = true;
    $.ajax({url: "kperf/points.json", dataType: "json", cache: false})
      .done(function (d) { points = d; showBlanks(); })
      .fail(function () { points = {schema: "none", points: {}, no_results: []}; });
  }

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"}[c];
    });
  }

  function sig(x) {
    var a = Math.abs(x);
    return a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2);
  }
  function fmtTime(s) {
    if (s === null || s === undefined) return "-";
    if (s >= 1) return sig(s) + " s";
    if (s >= 1e-3) return sig(s * 1e3) + " ms";
    if (s >= 1e-6) return sig(s * 1e6) + " \u00b5s";
    return sig(s * 1e9) + " ns";
  }
  function fmtEnergy(j) {
    if (j >= 1) return sig(j) + " J";
    if (j >= 1e-3) return sig(j * 1e3) + " mJ";
    if (j >= 1e-6) return sig(j * 1e6) + " \u00b5J";
    return sig(j * 1e9) + " nJ";
  }

  function fullHash(short) {
    var rev = $.asv.get_revision(short);
    return rev === null ? short : $.asv.main_json.revision_to_hash[rev];
  }

  /* The key kperf/site/data.py:point_key gives the point: machine|commit|benchmark|k=v;... */
  function pointKey(bm, item, commitShort, xaxis) {
    if (xaxis !== 0 || !item || !item.series || !item.series.kperf_state) return null;
    var info = $.asv.main_json.benchmarks[bm];
    if (!info) return null;
    var perm = item.series.kperf_perm, parts = [];
    for (var i = 0; i < info.param_names.length; ++i) {
      var idx = perm[i + 1];
      if (idx === null || idx === undefined) return null;
      parts.push([info.param_names[i],
                  String($.asv.convert_benchmark_param_value(info.params[i][idx]))]);
    }
    parts.sort(function (a, b) { return a[0] < b[0] ? -1 : (a[0] > b[0] ? 1 : 0); });
    // an Energy series' points come from its Time twin's measurement and records
    var recorded = bm.replace(/Energy\.track_energy$/, "Time.track_time");
    return item.series.kperf_state.machine + "|" + fullHash(commitShort) + "|" + recorded + "|" +
      parts.map(function (p) { return p[0] + "=" + p[1]; }).join(";");
  }

  function entry(bm, item, commit, xaxis) {
    if (!points) { load(); return null; }
    var key = pointKey(bm, item, commit, xaxis);
    return key === null ? null : (points.points[key] || null);
  }

  window.kperfPoint = {
    key: pointKey,
    tooltip: function (bm, item, commit, xaxis) {
      var p = entry(bm, item, commit, xaxis);
      if (!p) {
        return /Time\.track_time$/.test(bm) && points ?
          "<br><i>no telemetry record for this point</i>" : "";
      }
      var out = [];
      var clock = p.sm_clock_median_mhz === null ? "SM clock: no reading" :
        "SM " + p.sm_clock_median_mhz.toFixed(0) + " MHz" +
        (p.sm_clock_min_mhz === null ? "" : " (min " + p.sm_clock_min_mhz.toFixed(0) + ")");
      var power = p.power_mean_w === null ? "power: no reading" :
        p.power_mean_w.toFixed(0) + " W" +
        (p.power_limit_w === null ? "" : " of " + p.power_limit_w.toFixed(0) + " W limit");
      out.push(esc(clock + " \u00b7 " + power));
      out.push("throttle: " + esc(p.throttle_bits_or === null ? "no reading" :
        (p.throttle_names.length ? p.throttle_names.join(" ") : "none")));
      if (p.time_min_s !== null) {
        out.push("samples: " + esc(fmtTime(p.time_min_s) + " \u2013 " + fmtTime(p.time_max_s) +
          " (" + p.n_samples + " samples, " + p.n_records +
          (p.n_records === 1 ? " process)" : " processes)")));
      }
      out.push("energy/call: " + esc(p.energy_per_call_j === null ? "\u2014 (" +
        p.energy_note + ")" : fmtEnergy(p.energy_per_call_j)));
      if (p.energy_state) out.push("energy burst: " + esc(p.energy_state));
      out.push("<i>click: clocks per sample</i>");
      return "<br>" + out.join("<br>");
    },
    click: function (bm, item, commit, xaxis) {
      var p = entry(bm, item, commit, xaxis);
      if (!p) return false;
      window.location.href = "kperf/telemetry.html#point=" + encodeURIComponent(p.id);
      return true;
    }
  };

  /* Blanks explained: a banner over the grid and the list, a note on an empty regressions
   * list. */
  function showBlanks() {
    if (!points || $("#kperf-no-results").length) return;
    var missing = points.no_results || [];
    if (missing.length) {
      var banner = $("<div id='kperf-no-results' class='kperf-banner'></div>");
      banner.text(missing.length + " of " + points.n_benchmarks + " benchmarks have no " +
        "results in this history, so their cells are blank: " + points.no_results_reason);
      banner.append($("<a href='kperf/index.html#missing'> Which ones and why</a>"));
      $("#summarygrid-display").prepend(banner);
    }
  }

  function regressionsNote() {
    var body = $("#regressions-body");
    if (!body.length || $("#kperf-no-regressions").length) return;
    $.ajax({url: "regressions.json", dataType: "json", cache: false}).done(function (d) {
      if (d && d.regressions && d.regressions.length === 0 &&
          !$("#kperf-no-regressions").length) {
        var note = $("<p id='kperf-no-regressions' class='kperf-banner'></p>");
        note.text("No regressions: asv flags a step only where a benchmark's history on " +
          "one machine moves by more than its threshold (asv.conf.json " +
          "regressions_thresholds), and it needs a few commits of history to see one. " +
          "The PR gate's verdicts are on the Gate reports page.");
        body.prepend(note);
      }
    });
  }

  /* Steps: under each row of asv's regressions table, its cause. asv redraws the table
   * (grouping, ignoring), so rows are annotated whenever they appear. */
  var steps = null;

  function stepOf(series, commitText) {
    var after = commitText.split("..").pop().trim();
    if (!steps || !after) return null;
    for (var i = 0; i < steps.length; ++i) {
      var s = steps[i];
      if (s.series === series && s.after.commit.indexOf(after) === 0) return s;
    }
    return null;
  }

  function annotateSteps() {
    if (!steps) return;
    $("#regressions-body table tbody tr").each(function () {
      var row = $(this);
      if (row.find(".kperf-cause").length) return;
      var cells = row.children("td");
      var step = stepOf(cells.eq(0).find("a").first().text(), cells.eq(2).text());
      if (!step) return;
      var cause = $("<div class='kperf-cause'></div>").addClass("kperf-cause-" + step.cause)
        .attr("data-cause", step.cause).attr("title", step.why).text(step.text);
      cause.append($("<a> head to head</a>").attr("href", "kperf/head-to-head.html#step-" +
                                                  encodeURIComponent(step.id)));
      cells.eq(0).append(cause);
    });
  }

  function watchRegressions() {
    var body = document.getElementById("regressions-body");
    if (!body || body.kperfWatched) return;
    body.kperfWatched = true;
    $.ajax({url: "kperf/steps.json", dataType: "json", cache: false}).done(function (d) {
      steps = (d && d.steps) || [];
      annotateSteps();
      new MutationObserver(annotateSteps).observe(body, {childList: true, subtree: true});
    });
  }

  function onRegressions() {
    if (!/^#\/?regressions/.test(window.location.hash)) return;
    setTimeout(regressionsNote, 300);
    watchRegressions();
  }

  $(function () {
    load();
    $(window).on("hashchange", onRegressions);
    onRegressions();
  });
})();
