def wait_a_bit():
    import time
    time.sleep(0.5)


import queue

q = queue.SimpleQueue()
