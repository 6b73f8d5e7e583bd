"""Operations. Importing this package registers every op on the Recorder."""
from . import elementwise  # noqa: F401
from . import math  # noqa: F401
from . import reduce  # noqa: F401
from . import normalize  # noqa: F401
from . import scan  # noqa: F401
from . import sort  # noqa: F401
from . import matmul  # noqa: F401
from . import image  # noqa: F401
from . import indirect  # noqa: F401
from . import shape  # noqa: F401
from ..kernels import user  # noqa: F401  (rec.run_kernel)
