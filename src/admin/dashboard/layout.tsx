import type { Child } from "hono/jsx";

/** Plain server-rendered HTML: no script runs on these pages, so the CSP forbids all scripts. */
export const DASHBOARD_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const STYLE = `
:root { --ink:#1d2330; --muted:#5b6475; --line:#dde1e8; --bg:#f6f7f9; --ok:#1f7a4d; --warn:#9a6400; --bad:#b42318; --accent:#2f5bd3; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--ink); background:var(--bg); }
header { display:flex; align-items:center; gap:24px; padding:10px 24px; background:#151a24; color:#fff; }
header .brand { font-weight:600; }
header nav a { color:#c8d0e0; text-decoration:none; margin-right:16px; }
header nav a.current { color:#fff; border-bottom:2px solid #fff; padding-bottom:2px; }
header form { margin-left:auto; }
main { padding:20px 24px; max-width:1400px; }
h1 { font-size:20px; margin:0 0 14px; } h2 { font-size:16px; margin:22px 0 8px; }
table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#eef0f4; font-weight:600; font-size:12px; text-transform:uppercase; letter-spacing:.03em; color:var(--muted); }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
code, pre, .mono { font-family:ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12.5px; }
pre { background:#fff; border:1px solid var(--line); padding:10px; overflow:auto; max-height:360px; white-space:pre-wrap; word-break:break-all; }
a { color:var(--accent); }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; background:#e8ebf0; color:var(--muted); }
.badge.ok, .badge.processed { background:#dcf3e6; color:var(--ok); }
.badge.backlog, .badge.pending, .badge.processing, .badge.retry, .badge.unknown, .badge.stale, .badge.skipped { background:#fdf0d5; color:var(--warn); }
.badge.failing, .badge.dead, .badge.open { background:#fde2df; color:var(--bad); }
.filters { display:flex; flex-wrap:wrap; gap:8px; align-items:end; margin-bottom:12px; background:#fff; border:1px solid var(--line); padding:10px; }
.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); }
input, select, button { font:inherit; padding:4px 8px; border:1px solid #c3c9d4; border-radius:4px; background:#fff; }
button { background:var(--accent); color:#fff; border-color:var(--accent); cursor:pointer; }
button.secondary { background:#fff; color:var(--ink); border-color:#c3c9d4; }
.flash { padding:8px 12px; background:#dcf3e6; border:1px solid #a6dcbc; margin-bottom:12px; }
.error { padding:8px 12px; background:#fde2df; border:1px solid #f3b1a9; margin-bottom:12px; }
.muted { color:var(--muted); }
.cards { display:grid; grid-template-columns:repeat(auto-fill, minmax(180px, 1fr)); gap:10px; margin-bottom:12px; }
.card { background:#fff; border:1px solid var(--line); padding:10px 12px; } .card .value { font-size:20px; font-weight:600; }
ol.timeline { list-style:none; padding:0; margin:0; border-left:2px solid var(--line); }
ol.timeline li { position:relative; padding:4px 0 10px 18px; }
ol.timeline li::before { content:""; position:absolute; left:-7px; top:9px; width:12px; height:12px; border-radius:50%; background:#c3c9d4; }
ol.timeline li.processed::before, ol.timeline li.ok::before { background:var(--ok); }
ol.timeline li.dead::before { background:var(--bad); }
ol.timeline li.retry::before, ol.timeline li.unknown::before, ol.timeline li.stale::before { background:var(--warn); }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:4px 16px; background:#fff; border:1px solid var(--line); padding:10px 12px; margin:0; }
dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; }
.login { max-width:360px; margin:80px auto; background:#fff; border:1px solid var(--line); padding:24px; }
.login input { width:100%; margin:6px 0 12px; }
`;

const SECTIONS = [
  { path: "/admin", label: "Sources" },
  { path: "/admin/receipts", label: "Receipts" },
  { path: "/admin/dead", label: "Dead letters" },
  { path: "/admin/quarantine", label: "Quarantine" },
  { path: "/admin/alerts", label: "Alerts" },
] as const;

export function Page(props: { title: string; current?: string; signedIn?: boolean; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · webhook receiver`}</title>
        <style>{STYLE}</style>
      </head>
      <body>
        <header>
          <span class="brand">Webhook receiver</span>
          {props.signedIn !== false && (
            <>
              <nav>
                {SECTIONS.map((section) => (
                  <a href={section.path} class={section.path === props.current ? "current" : undefined}>
                    {section.label}
                  </a>
                ))}
              </nav>
              <form method="post" action="/admin/logout">
                <button class="secondary" type="submit">
                  Sign out
                </button>
              </form>
            </>
          )}
        </header>
        <main>{props.children}</main>
      </body>
    </html>
  );
}

export function formatInstant(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export function Badge(props: { value: string | null }) {
  return <span class={`badge ${props.value ?? ""}`}>{props.value ?? "—"}</span>;
}
