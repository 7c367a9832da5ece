import { Hono } from "hono";
import { admin } from "./admin";
import { webhooks } from "./ingest/route";
import { apiError, renderError } from "./lib/errors";

export const app = new Hono<{ Bindings: Env }>();

app.get("/health", (c) => c.json({ status: "ok" }));
app.route("/webhooks", webhooks);
app.route("/admin", admin);
app.notFound(() => {
  throw apiError(404, "not_found", "No such route.");
});
app.onError(renderError);
