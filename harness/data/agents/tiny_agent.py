"""The smallest agent that speaks the OpenAI chat-completions API with tool calls: standard library only.

It is the example of docs/agents.md ("any CLI agent") and what the tests run as a `cmd:` agent:

    harness run tasks/wordcount --agent 'cmd:python3 /opt/harness-examples/tiny_agent.py' ...

It reads the task from $HARNESS_TASK_FILE, offers the model one tool, `bash`, runs each call in the
working directory and sends back its output, until the model answers without a call (or after 50 calls).
The base URL and key come from OPENAI_BASE_URL and OPENAI_API_KEY, as for the official SDK.
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

TOOLS = [{"type": "function", "function": {
    "name": "bash", "description": "Run a bash command in the project folder; answers its output and exit code.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]


def chat(messages):
    body = json.dumps({"model": os.environ.get("HARNESS_MODEL", "model"), "messages": messages,
                       "tools": TOOLS}).encode()
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return json.load(answer)["choices"][0]["message"]


def main():
    with open(os.environ["HARNESS_TASK_FILE"], encoding="utf-8") as f:
        messages = [{"role": "user", "content": f.read()}]
    for _ in range(50):
        try:
            reply = chat(messages)
        except urllib.error.HTTPError as exc:
            print("the model call failed:", exc.code, exc.read().decode(errors="replace")[:2000])
            return 1
        messages.append({k: v for k, v in reply.items() if k in ("role", "content", "tool_calls")})
        if reply.get("content"):
            print(reply["content"])
        calls = reply.get("tool_calls") or []
        if not calls:
            return 0
        for call in calls:
            command = json.loads(call["function"]["arguments"]).get("command", "")
            print("$", command)
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
            output = (done.stdout + done.stderr)[-20000:] + f"\n[exit {done.returncode}]"
            print(output)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    return 0


if __name__ == "__main__":
    sys.exit(main())
