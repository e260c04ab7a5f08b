"""Sessionscope's session store: reads and repairs a mothx session directory. No UI imports."""
