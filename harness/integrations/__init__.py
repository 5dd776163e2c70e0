"""Framework adapters: other agents' loops on the host, every command in the harness's sandbox.

- `harness.integrations.mini.HarnessEnvironment`: mini-swe-agent's environment class
  (`pip install 'harness[mini]'`).
- `harness.integrations.inspect_provider`: Inspect AI's sandbox environment `harness`, registered
  through Inspect's entry point (`pip install 'harness[inspect]'`).

Both get their sandbox from `harness.integrations._sandbox.open_for_adapter`. This package imports
neither framework: each adapter module imports its own, so importing one needs only its extra.
See docs/agents.md.
"""

from harness.integrations._sandbox import AdapterSandbox, Target, open_for_adapter, sandbox_path

__all__ = ["AdapterSandbox", "Target", "open_for_adapter", "sandbox_path"]
