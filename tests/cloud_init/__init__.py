"""The node scripts of cloud-init/ (the steps, run-step, the resume unit) run in the sandbox with stand-ins."""
