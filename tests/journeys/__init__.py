"""Journeys: what a user lives through across the parts (day 2 against a deployed state, the head staying, the
node payload delivered as the deploy job delivers it, nodes booted end to end from the plan)."""
