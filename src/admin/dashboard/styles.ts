/**
 * The dashboard's one stylesheet, inline (the CSP allows inline styles and nothing else). Below 720 px the header
 * keeps its navigation on one scrollable line and tables turn into one card per row (each cell labelled by its
 * `data-label`), so nothing is wider than the phone.
 */
export const STYLE = `
:root { --ink:#1d2330; --muted:#5b6475; --line:#dde1e8; --bg:#f6f7f9; --ok:#1f7a4d; --warn:#9a6400; --bad:#b42318; --accent:#2f5bd3; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--ink); background:var(--bg); }
header { display:flex; align-items:center; gap:8px 24px; padding:10px 24px; background:#151a24; color:#fff; flex-wrap:wrap; }
header .brand { font-weight:600; white-space:nowrap; }
header nav { display:flex; gap:16px; overflow-x:auto; white-space:nowrap; scrollbar-width:none; }
header nav a { color:#c8d0e0; text-decoration:none; padding:2px 0; }
header nav a.current { color:#fff; border-bottom:2px solid #fff; }
header form { margin-left:auto; }
main { padding:20px 24px; max-width:1400px; }
h1 { font-size:20px; margin:0 0 14px; overflow-wrap:anywhere; } h2 { font-size:16px; margin:22px 0 8px; }
table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#eef0f4; font-weight:600; font-size:12px; text-transform:uppercase; letter-spacing:.03em; color:var(--muted); }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
code, pre, .mono { font-family:ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12.5px; }
.mono { overflow-wrap:anywhere; }
pre { background:#fff; border:1px solid var(--line); padding:10px; overflow:auto; max-height:360px; white-space:pre-wrap; word-break:break-all; }
a { color:var(--accent); }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; background:#e8ebf0; color:var(--muted); white-space:nowrap; }
.badge.ok, .badge.processed, .badge.resolved, .badge.allowed { background:#dcf3e6; color:var(--ok); }
.badge.backlog, .badge.acknowledged, .badge.warning, .badge.pending, .badge.processing, .badge.retry, .badge.unknown, .badge.stale, .badge.skipped { background:#fdf0d5; color:var(--warn); }
.badge.failing, .badge.dead, .badge.open, .badge.refused, .badge.critical { background:#fde2df; color:var(--bad); }
.filters { display:flex; flex-wrap:wrap; gap:8px; align-items:end; margin-bottom:12px; background:#fff; border:1px solid var(--line); padding:10px; }
.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); }
input, select, button { font:inherit; padding:4px 8px; border:1px solid #c3c9d4; border-radius:4px; background:#fff; max-width:100%; }
button { background:var(--accent); color:#fff; border-color:var(--accent); cursor:pointer; }
button.secondary { background:#fff; color:var(--ink); border-color:#c3c9d4; }
button.danger { background:#fff; color:var(--bad); border-color:#f3b1a9; }
.actions { display:flex; flex-wrap:wrap; gap:8px; margin:0 0 12px; }
form.issue-action { display:flex; flex-wrap:wrap; gap:6px; margin:0 0 6px; } form.issue-action input { flex:1 1 10em; min-width:0; }
ol.issue-history { margin:4px 0 0; padding-left:18px; font-size:12px; color:var(--muted); }
.flash { padding:8px 12px; background:#dcf3e6; border:1px solid #a6dcbc; margin-bottom:12px; }
.error { padding:8px 12px; background:#fde2df; border:1px solid #f3b1a9; margin-bottom:12px; }
.muted { color:var(--muted); }
.cards { display:grid; grid-template-columns:repeat(auto-fill, minmax(160px, 1fr)); gap:10px; margin-bottom:12px; }
.card { background:#fff; border:1px solid var(--line); padding:10px 12px; } .card .value { font-size:20px; font-weight:600; }
.reasons { list-style:none; margin:0 0 12px; padding:0; }
.reasons li { background:#fff; border:1px solid var(--line); border-left:4px solid var(--bad); padding:6px 10px; margin-bottom:6px; }
.reasons li.backlog { border-left-color:var(--warn); }
.reasons li.still-verifying, .reasons li.current, .reasons li.not-seen-yet { border-left-color:var(--warn); } .reasons li.safe-to-remove { border-left-color:var(--ok); }
.badge.safe-to-remove { background:#dcf3e6; color:var(--ok); } .badge.still-verifying, .badge.not-seen-yet { background:#fdf0d5; color:var(--warn); }
td .reasons { margin:4px 0 0; font-size:12px; } td .reasons li { padding:2px 6px; margin-bottom:2px; }
.charts { display:grid; grid-template-columns:repeat(auto-fill, minmax(320px, 1fr)); gap:10px; margin-bottom:12px; }
figure.chart { margin:0; background:#fff; border:1px solid var(--line); padding:8px 10px; min-width:0; }
figure.chart figcaption { display:flex; gap:8px; align-items:baseline; flex-wrap:wrap; }
figure.chart svg { width:100%; height:auto; display:block; }
figure.chart text { font-size:11px; fill:var(--muted); font-variant-numeric:tabular-nums; }
figure.chart .grid { stroke:#eceef2; }
.bar.ink { fill:#4a6fd8; } .bar.ok { fill:var(--ok); } .bar.bad { fill:var(--bad); } .bar.warn { fill:#c98a12; }
.line { fill:none; stroke-width:2; } .line.p50 { stroke:#4a6fd8; } .line.p95 { stroke:#c98a12; stroke-dasharray:4 3; }
.dot.p50 { fill:#4a6fd8; } .dot.p95 { fill:#fff; stroke:#c98a12; stroke-width:1.5; }
.legend { margin-left:auto; font-size:12px; color:var(--muted); }
.key { display:inline-block; width:12px; height:3px; vertical-align:middle; margin-left:6px; } .key.p50 { background:#4a6fd8; } .key.p95 { background:#c98a12; }
.chart-note { font-size:12px; margin:4px 0 0; }
td.spark-cell { white-space:nowrap; } svg.spark { vertical-align:middle; margin-left:6px; } svg.spark .baseline { stroke:#c3c9d4; stroke-width:1; } svg.spark .spark-bar { fill:#4a6fd8; } svg.spark .spark-bar.has-dead { fill:var(--bad); }
.pager { display:flex; gap:16px; margin:12px 0; }
#system-quiet { margin:0 0 10px; } ul.system-resolved { margin:0 0 10px; padding-left:18px; font-size:12px; }
#database-sizes { max-width:480px; margin-bottom:12px; } #database-sizes tr.near-cap td, #database-sizes tr.silent td { background:#fde2df; color:var(--bad); font-weight:600; }
ol.timeline { list-style:none; padding:0; margin:0; border-left:2px solid var(--line); }
ol.timeline li { position:relative; padding:4px 0 10px 18px; }
ol.timeline li::before { content:""; position:absolute; left:-7px; top:9px; width:12px; height:12px; border-radius:50%; background:#c3c9d4; }
ol.timeline li.processed::before, ol.timeline li.ok::before { background:var(--ok); }
ol.timeline li.dead::before { background:var(--bad); }
ol.timeline li.retry::before, ol.timeline li.unknown::before, ol.timeline li.stale::before, ol.timeline li.replay::before { background:var(--warn); }
dl.facts { display:grid; grid-template-columns:max-content minmax(0, 1fr); gap:4px 16px; background:#fff; border:1px solid var(--line); padding:10px 12px; margin:0; }
dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; overflow-wrap:anywhere; }
.login { max-width:360px; margin:80px auto; background:#fff; border:1px solid var(--line); padding:24px; }
.login input { width:100%; margin:6px 0 12px; }
@media (max-width: 720px) {
  header { padding:8px 12px; }
  /* One scrolling line: a light edge on the right while more sections lie past it (it scrolls with the view;
     the header-coloured cover at the end of the list scrolls with the links and hides it once the end is in view). */
  header nav { order:3; width:100%; background:linear-gradient(to left, #151a24 40%, rgba(21,26,36,0)) right / 28px 100% no-repeat local, linear-gradient(to left, rgba(200,208,224,.55), rgba(200,208,224,0)) right / 18px 100% no-repeat scroll; }
  main { padding:12px; }
  table.rows, table.rows tbody, table.rows tr, table.rows td { display:block; width:100%; }
  table.rows { border:0; background:none; }
  table.rows thead { display:none; }
  table.rows tr { background:#fff; border:1px solid var(--line); margin-bottom:8px; padding:4px 0; }
  table.rows td { border:0; padding:3px 10px; display:grid; grid-template-columns:42% minmax(0, 1fr); gap:8px; text-align:left; }
  table.rows td.num { text-align:left; }
  table.rows td::before { content:attr(data-label); color:var(--muted); font:12px system-ui, sans-serif; }
  table.rows td > .badge, table.rows td > input { justify-self:start; }
  table.rows td:empty { display:none; }
  .filters label { flex:1 1 40%; } .filters input, .filters select { width:100%; }
  .charts { grid-template-columns:1fr; }
  dl.facts { grid-template-columns:1fr; } dl.facts dd { margin-bottom:6px; }
  .login { margin:24px auto; }
}
`;
