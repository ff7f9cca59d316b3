"""The periodic controller: snapshot, decide, plan, enact, record."""
