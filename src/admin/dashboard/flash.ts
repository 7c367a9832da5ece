import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { ApiError } from "../../lib/errors";

/**
 * One-time messages after a form post ("2 receipts replayed."). The post sets a short-lived cookie and redirects;
 * the next page shows the message and deletes the cookie in the same answer, so a reload — or the back button —
 * does not show it again, and nothing about it is in the URL.
 *
 * @example
 *   setFlash(c, "2 receipts replayed.");
 *   return c.redirect("/admin/dead", 303);
 *   // …and on the page: const flash = takeFlash(c);
 */

const FLASH_COOKIE = "admin_flash";
const MAX_LENGTH = 300;

export function setFlash(c: Context, message: string): void {
  setCookie(c, FLASH_COOKIE, message.slice(0, MAX_LENGTH), {
    path: "/admin",
    httpOnly: true,
    secure: true,
    sameSite: "Strict",
    maxAge: 60,
  });
}

export function takeFlash(c: Context): string | undefined {
  const value = getCookie(c, FLASH_COOKIE);
  if (value === undefined) return undefined;
  deleteCookie(c, FLASH_COOKIE, { path: "/admin", secure: true });
  return value.slice(0, MAX_LENGTH) || undefined;
}

/** The message of a 400 thrown by a filter parser, to show beside the form instead of replacing the page. */
export async function filterProblem(run: () => unknown): Promise<string | undefined> {
  try {
    run();
    return undefined;
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 400) throw error;
    return error.message;
  }
}
