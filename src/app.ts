import { Hono } from "hono";
import { webhooks } from "./ingest/route";
import { apiError, renderError } from "./lib/errors";

export const app = new Hono<{ Bindings: Env }>();

app.get("/health", (c) => c.json({ status: "ok" }));
app.route("/webhooks", webhooks);
app.notFound(() => {
  throw apiError(404, "not_found", "No such route.");
});
app.onError(renderError);
