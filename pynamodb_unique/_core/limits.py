"""DynamoDB's limits that the library enforces, and the library's own defaults."""

from typing import Final

#: DynamoDB's limit on the length of a ClientRequestToken (1 to 36 characters).
MAX_TOKEN_LENGTH: Final = 36
#: How many times a write is sent at most while it meets conflicts or throttling
#: (``Meta.unique_retry_attempts`` overrides it per model).
RETRY_ATTEMPTS: Final = 5
#: How many plans one write sends at most: the first, then re-plans after its view proved stale
#: (the engine's save, update and delete, and a composed TransactWrite's lock moves).
MAX_PLANS: Final = 4
