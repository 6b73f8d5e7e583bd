"""Operations. Importing this package registers every op on the Recorder."""
from . import elementwise  # noqa: F401
