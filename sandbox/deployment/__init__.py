"""Where sandboxes run: the container's life, apart from what runs inside it (`sandbox.runtime`).

A second provider (another container engine, a remote machine) is a second module here.
"""

from sandbox.deployment.docker import BASE_ENV, DockerDeployment, container_options

__all__ = ["BASE_ENV", "DockerDeployment", "container_options"]
