import { describe, expect, it } from "vitest";
import { account, credit, deliverDemo, waitForStatus } from "../support/deliveries";

describe("the receiving pipeline, end to end", () => {
  it("accepts a signed delivery, then processes it once through the queue", async () => {
    const first = await deliverDemo("msg_smoke_1", credit("acct_smoke", 100));
    expect(first.status).toBe(200);
    const accepted = await first.json<{ status: string; receipt: string }>();
    expect(accepted.status).toBe("accepted");
    expect(accepted.receipt).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);

    const again = await deliverDemo("msg_smoke_1", credit("acct_smoke", 100));
    expect(await again.json()).toEqual({ status: "duplicate", receipt: accepted.receipt });

    expect(await waitForStatus("demo", "msg_smoke_1")).toBe("processed");
    expect((await account("acct_smoke"))?.credits).toBe(100);
  });
});
