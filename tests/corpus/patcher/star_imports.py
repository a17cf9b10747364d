"""Star imports: every name they bring in is covered."""
from time import *
from datetime import *
from threading import *

sleep(1)
stamp = (time(), monotonic(), datetime.now(), date.today())
worker = Thread(target=lambda: None)
