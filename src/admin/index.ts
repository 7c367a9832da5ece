import { Hono } from "hono";
import { adminApi } from "./api/routes";
import type { AdminEnv } from "./auth";
import { capAdminBody } from "./body-cap";
import { dashboard } from "./dashboard/routes";

/** Everything under /admin: the JSON API for curl and scripts, and the dashboard for people. */
export const admin = new Hono<AdminEnv>();

// Before authentication and before any parser: an admin body is small or refused (./body-cap.ts).
admin.use("*", capAdminBody);
admin.route("/api", adminApi);
admin.route("/", dashboard);
