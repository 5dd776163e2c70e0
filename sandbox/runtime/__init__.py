"""What runs inside a sandbox: commands, files and archives, apart from how its container lives.

`ChannelRuntime` drives a container through its exec channel. `sandbox.runtime.local` holds a
directory-backed double for tests only; it is deliberately not exported here.
"""

from sandbox.runtime.channel import ChannelRuntime

__all__ = ["ChannelRuntime"]
