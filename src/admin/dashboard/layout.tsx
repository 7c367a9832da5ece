import { raw } from "hono/html";
import type { Child } from "hono/jsx";
import { STYLE } from "./styles";

export { formatDuration, formatInstant } from "./format";

/** Plain server-rendered HTML: no script runs on these pages, so the CSP forbids all scripts. */
export const DASHBOARD_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** A small hook in the header's colours, as an inline SVG. */
const FAVICON = `data:image/svg+xml,${encodeURIComponent(
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#151a24"/><path d="M5 3v6a3 3 0 0 0 6 0V7" stroke="#fff" stroke-width="2" fill="none" stroke-linecap="round"/></svg>',
)}`;

const SECTIONS = [
  { path: "/admin", label: "Sources" },
  { path: "/admin/receipts", label: "Receipts" },
  { path: "/admin/dead", label: "Dead letters" },
  { path: "/admin/quarantine", label: "Quarantine" },
  { path: "/admin/issues", label: "Issues" },
  { path: "/admin/alerts", label: "Alerts" },
  { path: "/admin/system", label: "System" },
  { path: "/admin/audit-log", label: "Audit log" },
] as const;

/**
 * Every page's frame: header with the sections and sign-out, then the page's own content.
 *
 * @example
 *   c.html(<Page title="Alerts" current="/admin/alerts"><h1>Alerts</h1></Page>)
 */
export function Page(props: { title: string; current?: string; signedIn?: boolean; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · webhook receiver`}</title>
        {/* Inline, so no browser asks for /favicon.ico (a 404 on every page); the CSP allows data: images. */}
        <link rel="icon" href={FAVICON} />
        {/* Raw: JSX escapes text, and an escaped `>` or `"` silently drops the rules that hold one (a browser does not unescape inside <style>). */}
        <style>{raw(STYLE)}</style>
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

export function Badge(props: { value: string | null }) {
  return <span class={`badge ${props.value ?? ""}`}>{props.value ?? "—"}</span>;
}
