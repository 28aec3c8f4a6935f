"""The code a submission appends to hand a byte from one of its student processes to another (tests/test_seal.py).

Every student process that imports the file sends its own token through every channel it can think of and
receives through the same ones, at import and again from a thread for a few seconds (so that a process
started early also hears from later ones), and prints what it got: ``SEAL {json}``.  Channels: files in its
own folders and every shared one (scratch, HOME, TMPDIR, cwd, the folder above scratch, /tmp, /var/tmp,
/dev/shm, /run/lock, the submission), an opened-up scratch folder, FIFOs and path sockets found there,
abstract Unix sockets, SysV shared memory, POSIX message queues, signals to every pid it can name, the
command names of other processes (``/proc/*/comm``), locks on files every process may read (an OFD lock's
and a POSIX lock's offset carry the token; ``flock`` a file of its choosing among torch's), the size of a file
in its own scratch folder opened to others by ``chmod``, the owner of a pipe (``F_SETOWN`` to every pid it can
name: an oracle of which exist, and with ``F_SETSIG`` and ``O_ASYNC`` the kernel would signal them), and the
pipes and sockets it inherited (their inodes are compared across processes by the test).
"""

CHANNEL_CODE = r'''

def _seal_probe():
    import ctypes, errno, fcntl, json, os, socket, stat, struct, sys, threading, time
    import torch
    token = "sealtok-" + os.urandom(6).hex()
    got, sent, held = {}, [], []
    shared = os.path.dirname(torch.__file__)  # every student process reads torch
    lockable = sorted(os.path.join(shared, name) for name in os.listdir(shared)
                      if name.endswith(".py") and name not in ("version.py", "__init__.py"))
    flocked = int(token[8:], 16) % len(lockable)
    lock = "hhqqi4x"  # struct flock
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except Exception:
        libc = None
    scratch = os.getcwd()
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [scratch, os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), os.path.dirname(scratch),
               "/tmp", "/var/tmp", "/dev/shm", "/run/lock", here]
    folders = [f for f in dict.fromkeys(folders) if f]

    def note(channel, text):
        text = text.decode("latin-1") if isinstance(text, bytes) else str(text)
        for word in text.replace("\x00", " ").split():
            if word.startswith("sealtok-") and word[:20] != token[:20]:
                got.setdefault(word[:20], channel)

    def send():
        try:
            os.chmod(scratch, 0o777)
            sent.append("scratch opened")
        except OSError:
            pass
        try:  # a size others may stat in an opened scratch folder (Landlock does not govern stat)
            with open(os.path.join(scratch, "seal-size"), "wb") as stream:
                stream.truncate(int(token[8:14], 16))
            sent.append("size")
        except OSError:
            pass
        for name, command in (("version.py", 37), ("__init__.py", fcntl.F_SETLK)):  # F_OFD_SETLK, F_SETLK
            try:
                fd = os.open(os.path.join(shared, name), os.O_RDONLY)
                held.append(fd)
                fcntl.fcntl(fd, command, struct.pack(lock, fcntl.F_RDLCK, 0, int(token[8:], 16), 1, 0))
                sent.append("lock %d" % command)
            except OSError:
                pass
        try:
            fd = os.open(lockable[flocked], os.O_RDONLY)
            held.append(fd)
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            sent.append("flock")
        except OSError:
            pass
        for folder in folders:
            try:
                with open(os.path.join(folder, "seal-" + token), "w") as stream:
                    stream.write(token)
                sent.append("file " + folder)
            except OSError:
                pass
            try:
                os.mkfifo(os.path.join(folder, "seal-fifo-" + token))
                sent.append("fifo " + folder)
            except OSError:
                pass
        for name in ("\0amp-seal-%d" % k for k in range(16)):  # the first free abstract name
            try:
                server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                server.bind(name)
                server.listen(8)
                sent.append("abstract socket")
                threading.Thread(target=_serve, args=(server,), daemon=True).start()
                break
            except OSError:
                continue
        for folder in folders:
            try:
                server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                server.bind(os.path.join(folder, "seal-sock-" + token[8:16]))
                server.listen(8)
                sent.append("path socket " + folder)
                threading.Thread(target=_serve, args=(server,), daemon=True).start()
            except OSError:
                pass
        if libc is not None:
            for k in range(16):
                ident = libc.shmget(0x5EA10000 + k, 4096, 0o1600 | 0o666)  # IPC_CREAT | IPC_EXCL
                if ident >= 0:
                    address = libc.shmat(ident, None, 0)
                    if address not in (-1, None):
                        ctypes.memmove(address, token.encode(), len(token))
                        sent.append("shm")
                    break
            try:
                rt = ctypes.CDLL("librt.so.1", use_errno=True)
                for k in range(16):
                    queue = rt.mq_open(("/amp-seal-%d" % k).encode(), 0o100 | 0o200 | 2, 0o666, None)
                    if queue >= 0:
                        rt.mq_send(queue, token.encode(), len(token), 0)
                        sent.append("mqueue")
                        break
            except OSError:
                pass
        try:
            with open("/proc/self/comm", "w") as stream:
                stream.write(token[:15])
            sent.append("comm")
        except OSError:
            pass

    def _serve(server):
        while True:
            try:
                connection, _ = server.accept()
                connection.sendall(token.encode())
                connection.close()
            except OSError:
                return

    def receive():
        for name, command in (("version.py", 36), ("__init__.py", fcntl.F_GETLK)):  # F_OFD_GETLK, F_GETLK
            try:
                fd = os.open(os.path.join(shared, name), os.O_RDONLY)
            except OSError:
                continue
            start = 0
            try:
                for _ in range(64):  # each lock in turn, by offset
                    found = fcntl.fcntl(fd, command, struct.pack(lock, fcntl.F_WRLCK, 0, start, 0, 0))
                    kind, _, offset, length, _ = struct.unpack(lock, found)
                    if kind == fcntl.F_UNLCK:
                        break
                    note("lock %d" % command, "sealtok-%012x" % offset)
                    start = offset + max(length, 1)
            except OSError:
                pass
            finally:
                os.close(fd)
        for index, path in enumerate(lockable):
            if index == flocked:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):  # another process holds it
                    got.setdefault("flock " + os.path.basename(path), "flock")
            finally:
                os.close(fd)
        parent = os.path.dirname(scratch)
        for k in range(64):  # the sibling scratch folders (p0, p1...): their files' sizes
            folder = os.path.join(parent, "p%d" % k)
            if os.path.realpath(folder) == os.path.realpath(scratch):
                continue
            try:
                note("size in " + folder, "sealtok-%012x" % os.stat(os.path.join(folder, "seal-size")).st_size)
            except OSError:
                pass
        for folder in folders:
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                path = os.path.join(folder, name)
                note("name in " + folder, name)
                try:
                    mode = os.lstat(path).st_mode
                except OSError:
                    continue
                if stat.S_ISDIR(mode) and os.path.realpath(path) != os.path.realpath(scratch):
                    try:  # another process's folder: what is inside
                        for inner in os.listdir(path):
                            note("inside " + path, inner)
                            try:
                                with open(os.path.join(path, inner), "rb") as stream:
                                    note("file inside " + path, stream.read(200))
                            except OSError:
                                pass
                    except OSError:
                        pass
                elif stat.S_ISREG(mode):
                    try:
                        with open(path, "rb") as stream:
                            note("file in " + folder, stream.read(200))
                    except OSError:
                        pass
                elif stat.S_ISSOCK(mode):
                    try:
                        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        client.settimeout(1)
                        client.connect(path)
                        note("path socket", client.recv(200))
                        client.close()
                    except OSError:
                        pass
        for k in range(16):
            try:
                client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                client.settimeout(1)
                client.connect("\0amp-seal-%d" % k)
                note("abstract socket", client.recv(200))
                client.close()
            except OSError:
                pass
        if libc is not None:
            libc.shmat.restype = ctypes.c_void_p
            for k in range(16):
                ident = libc.shmget(0x5EA10000 + k, 0, 0)
                if ident >= 0:
                    address = libc.shmat(ident, None, 0o10000)  # SHM_RDONLY
                    if address not in (None, ctypes.c_void_p(-1).value):
                        note("shm", ctypes.string_at(address, 20))
            try:
                rt = ctypes.CDLL("librt.so.1", use_errno=True)
                for k in range(16):
                    queue = rt.mq_open(("/amp-seal-%d" % k).encode(), 0o4000)  # O_RDONLY | O_NONBLOCK
                    if queue >= 0:
                        buffer = ctypes.create_string_buffer(8192)
                        if rt.mq_receive(queue, buffer, 8192, None) > 0:
                            note("mqueue", buffer.raw[:40])
            except OSError:
                pass
        try:
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open("/proc/%s/comm" % entry, "rb") as stream:
                            note("comm of " + entry, stream.read())
                    except OSError:
                        pass
        except OSError:
            pass

    signalled = []
    own = os.getpid()
    for pid in list(range(max(2, own - 300), own + 300)) + [1]:
        if pid == own:
            continue
        try:
            os.kill(pid, 0)  # permission to signal it: a byte per signal number
            signalled.append(pid)
        except OSError:
            pass
    owned, armed = [], []
    try:
        ear, mouth = os.pipe()
        for pid in list(range(max(2, own - 300), own + 300)) + [1]:
            if pid == own:
                continue
            try:
                fcntl.fcntl(ear, fcntl.F_SETOWN, pid)  # works only for a pid that exists
                owned.append(pid)
            except OSError:
                pass
        for what, command, value in (("F_SETSIG", 10, 23), ("O_ASYNC", fcntl.F_SETFL, os.O_ASYNC)):  # SIGURG
            try:
                fcntl.fcntl(ear, command, value)
                armed.append(what)
            except OSError:
                pass
        if armed:  # nothing is ever written to the pipe; no owner left either
            fcntl.fcntl(ear, fcntl.F_SETOWN, 0)
    except OSError:
        pass
    links = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            links[fd] = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            pass
    send()
    receive()

    def later():
        for _ in range(8):
            time.sleep(0.5)
            before = dict(got)
            receive()
            if got != before:
                print("SEAL " + json.dumps({"token": token, "got": got, "late": True}), flush=True)

    threading.Thread(target=later, daemon=True).start()
    print("SEAL " + json.dumps({"token": token, "got": got, "sent": sent, "signalled": signalled, "fds": links,
                                "pid": own, "uid": os.getuid(), "owned": owned, "armed": armed}), flush=True)


_seal_probe()
'''
