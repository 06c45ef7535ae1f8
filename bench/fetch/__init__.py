"""Where a fetch's time goes: its fixed per-step cost, several data sets in one store,
progress across hosts."""
