/**
 * The local page's form: a blank key field takes the key the command was started with only when the run goes
 * to the address that key came with; a run posted for another address must bring its own keys.
 */
import { describe, expect, it } from "vitest";
import { formValues } from "./form.ts";

const defaults = {
  "--base-url": "https://api.example.test/",
  "--key": "command-key",
  "--viewer-key": "command-viewer-key",
  "--flow-url": "https://flows.example.test",
  "--flow-key": "command-flow-key",
};

describe("the page's form values", () => {
  it("fill blank keys from the command's for a run to the command's own addresses", () => {
    const values = formValues({ "--base-url": "https://api.example.test", "--agent": "a" }, defaults);
    expect(values).toMatchObject({
      key: "command-key",
      viewerKey: "command-viewer-key",
      flowKey: "command-flow-key",
    });
    expect(formValues({ "--agent": "a" }, defaults)).toMatchObject({ key: "command-key" });
  });

  it("never send the command's keys to another address: the run brings its own", () => {
    const elsewhere = formValues({ "--base-url": "http://127.0.0.1:9/", "--agent": "a" }, defaults);
    expect(elsewhere.key).toBeUndefined();
    expect(elsewhere.viewerKey).toBeUndefined();
    // The flow key is bound to the flow's address, not the API's.
    expect(elsewhere.flowKey).toBe("command-flow-key");
    const flowElsewhere = formValues({ "--flow-url": "http://127.0.0.1:9", "--agent": "a" }, defaults);
    expect(flowElsewhere.flowKey).toBeUndefined();
    expect(flowElsewhere.key).toBe("command-key");
    // Keys typed in go where the run goes.
    expect(formValues({ "--base-url": "http://127.0.0.1:9", "--key": "typed" }, defaults).key).toBe("typed");
  });
});
