from timewarp import vthreading, vtime

event = vthreading.Event()
vtime.sleep(5)
print("waiting forever", flush=True)
event.wait()
