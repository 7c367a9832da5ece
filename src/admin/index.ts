import { Hono } from "hono";
import { adminApi } from "./api/routes";
import type { AdminEnv } from "./auth";
import { dashboard } from "./dashboard/routes";

/** Everything under /admin: the JSON API for curl and scripts, and the dashboard for people. */
export const admin = new Hono<AdminEnv>();

admin.route("/api", adminApi);
admin.route("/", dashboard);
