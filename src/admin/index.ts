import { Hono } from "hono";
import { adminApi } from "./api";
import { dashboard } from "./dashboard";
import type { AdminEnv } from "./guards/auth";
import { capAdminBody } from "./guards/body-cap";

/** Everything under /admin: the JSON API for curl and scripts, and the dashboard for people. */
export const admin = new Hono<AdminEnv>();

// Before authentication and before any parser: an admin body is small or refused (./guards/body-cap.ts).
admin.use("*", capAdminBody);
admin.route("/api", adminApi);
admin.route("/", dashboard);
