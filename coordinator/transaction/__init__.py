"""The transaction coordinator: `__transaction_state`, the transaction state machine, markers."""
