import { raw } from "hono/html";
import type { Child } from "hono/jsx";
import { STYLE } from "./styles";

export { formatDuration, formatInstant } from "./format";

/** Plain server-rendered HTML: no script runs on these pages, so the CSP forbids all scripts. */
export const DASHBOARD_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const SECTIONS = [
  { path: "/admin", label: "Sources" },
  { path: "/admin/receipts", label: "Receipts" },
  { path: "/admin/dead", label: "Dead letters" },
  { path: "/admin/quarantine", label: "Quarantine" },
  { path: "/admin/alerts", label: "Alerts" },
  { path: "/admin/system", label: "System" },
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
