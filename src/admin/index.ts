import { Hono } from "hono";
import { adminApi } from "./api";
import { dashboard } from "./dashboard";
import type { AdminEnv } from "./guards/auth";
import { capAdminBody } from "./guards/body-cap";
import { refuseCrossSite } from "./guards/same-origin";

/** Everything under /admin: the JSON API for curl and scripts, and the dashboard for people. */
export const admin = new Hono<AdminEnv>();

// Before authentication and before any body is read: a change another site's page asks for is refused, and an
// admin body is small or refused (./guards/same-origin.ts, ./guards/body-cap.ts).
admin.use("*", refuseCrossSite);
admin.use("*", capAdminBody);
admin.route("/api", adminApi);
admin.route("/", dashboard);
