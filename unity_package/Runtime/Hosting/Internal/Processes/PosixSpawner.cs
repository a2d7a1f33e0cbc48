using System;
using System.Collections;
using System.Collections.Generic;
using System.IO;

namespace CoreAI.Launcher
{
    /// <summary>
    /// posix_spawn on Linux and macOS. The child gets: stdin from /dev/null; stdout and stderr appended to the log file
    /// (opened by the file actions, so even a failure before the program opens its own log lands there); no other
    /// descriptor of this process (glibc: posix_spawn_file_actions_addclosefrom_np, or one close action per descriptor
    /// open now; macOS: POSIX_SPAWN_CLOEXEC_DEFAULT); an empty signal mask and the default action for SIGHUP, SIGINT,
    /// SIGQUIT, SIGPIPE and SIGTERM whatever this process blocked or ignored (so SIGTERM stops it gracefully); its
    /// working directory by posix_spawn_file_actions_addchdir_np, or where that is missing (glibc before 2.29, macOS
    /// before 10.15) `/bin/sh -c 'cd -- "$0" &amp;&amp; exec "$@"'`, whose exec keeps the pid the program's own.
    /// Exited children are reaped (waitpid) by whoever asks first, so none stays a zombie.
    /// </summary>
    internal sealed class PosixSpawner : ProcessSpawner
    {
        private const short SetSignalDefaultFlag = 0x04;  // POSIX_SPAWN_SETSIGDEF (glibc and macOS)
        private const short SetSignalMaskFlag = 0x08;     // POSIX_SPAWN_SETSIGMASK (glibc and macOS)
        private const int OwnerReadWrite = 0x180;         // 0600
        private const int OpaqueSize = 1024;              // posix_spawn_file_actions_t / posix_spawnattr_t: 80 and 336 bytes in glibc, a pointer on macOS
        private const int SignalSetSize = 256;            // sigset_t: 128 bytes in glibc, 4 on macOS

        private static readonly HashSet<int> Children = new HashSet<int>();  // spawned by this domain: safe to reap

        private readonly Libc lib;

        /// <summary>A spawner over `lib` (<see cref="Libc.Current"/>).</summary>
        public PosixSpawner(Libc lib)
        {
            this.lib = lib ?? throw new ArgumentNullException(nameof(lib));
        }

        /// <summary>Tests: pretend posix_spawn_file_actions_addchdir_np is missing (the /bin/sh fallback runs).</summary>
        internal bool WithoutChdirAction { get; set; }

        /// <summary>Tests: pretend posix_spawn_file_actions_addclosefrom_np is missing (one close action per open descriptor).</summary>
        internal bool WithoutCloseFromAction { get; set; }

        public override int CurrentProcessId
        {
            get { return lib.GetPid(); }
        }

        public override SpawnedProcess Spawn(SpawnRequest request)
        {
            if (request == null) throw new ArgumentNullException(nameof(request));
            if (string.IsNullOrEmpty(request.Executable)) throw new ArgumentException("the program to start is missing");
            if (string.IsNullOrEmpty(request.LogPath)) throw new ArgumentException("the log file is missing");
            using (NativeMemory memory = new NativeMemory())
            {
                IntPtr actions = memory.Zeroed(OpaqueSize);
                IntPtr attributes = memory.Zeroed(OpaqueSize);
                Check(lib.FileActionsInit(actions), "posix_spawn_file_actions_init", request);
                try
                {
                    Check(lib.AttributesInit(attributes), "posix_spawnattr_init", request);
                    try
                    {
                        return Spawn(request, memory, actions, attributes);
                    }
                    finally
                    {
                        lib.AttributesDestroy(attributes);
                    }
                }
                finally
                {
                    lib.FileActionsDestroy(actions);
                }
            }
        }

        private SpawnedProcess Spawn(SpawnRequest request, NativeMemory memory, IntPtr actions, IntPtr attributes)
        {
            Check(lib.AddOpen(actions, 0, memory.Utf8("/dev/null"), 0, 0), "the stdin action", request);
            Check(lib.AddOpen(actions, 1, memory.Utf8(request.LogPath), lib.AppendFlags, OwnerReadWrite), "the log action", request);
            Check(lib.AddDup2(actions, 1, 2), "the stderr action", request);
            short flags = (short)(SetSignalDefaultFlag | SetSignalMaskFlag | lib.CloseOnExecDefault);
            if (lib.CloseOnExecDefault == 0) CloseInherited(actions, request);
            bool shellChdir = !string.IsNullOrEmpty(request.WorkingDirectory) && !AddChdir(actions, memory, request);
            IntPtr noSignals = memory.Zeroed(SignalSetSize);
            lib.SignalSetEmpty(noSignals);
            IntPtr defaults = memory.Zeroed(SignalSetSize);
            lib.SignalSetEmpty(defaults);
            foreach (int signal in Libc.DefaultSignals) lib.SignalSetAdd(defaults, signal);
            Check(lib.SetSignalMask(attributes, noSignals), "posix_spawnattr_setsigmask", request);
            Check(lib.SetSignalDefault(attributes, defaults), "posix_spawnattr_setsigdefault", request);
            Check(lib.SetFlags(attributes, flags), "posix_spawnattr_setflags", request);

            List<string> argv = new List<string>();
            string path = request.Executable;
            if (shellChdir)
            {
                path = "/bin/sh";
                argv.AddRange(new[] { "/bin/sh", "-c", "cd -- \"$0\" && exec \"$@\"", request.WorkingDirectory });
            }
            argv.Add(request.Executable);
            argv.AddRange(request.Arguments ?? new List<string>());
            int pid;
            int error = lib.Spawn(out pid, memory.Utf8(path), actions, attributes, memory.Utf8Array(argv), memory.Utf8Array(Environment(request)));
            if (error != 0)
                throw new SpawnException("cannot start '" + request.Executable + "': " + Errno.Describe(error), error);
            lock (Children) Children.Add(pid);
            return new PosixProcess(lib, pid);
        }

        /// <summary>True when the chdir action was added; false where the C library lacks it (the shell does it then).</summary>
        private bool AddChdir(IntPtr actions, NativeMemory memory, SpawnRequest request)
        {
            if (WithoutChdirAction) return false;
            try
            {
                Check(lib.AddChdir(actions, memory.Utf8(request.WorkingDirectory)), "the working-directory action", request);
                return true;
            }
            catch (EntryPointNotFoundException)
            {
                return false;
            }
        }

        /// <summary>glibc has no close-on-exec default: close every descriptor from 3 up in the child.</summary>
        private void CloseInherited(IntPtr actions, SpawnRequest request)
        {
            if (!WithoutCloseFromAction)
            {
                try
                {
                    Check(lib.AddCloseFrom(actions, 3), "the close-descriptors action", request);
                    return;
                }
                catch (EntryPointNotFoundException)
                {
                    // glibc before 2.34: name each descriptor open now (one opened by another thread meanwhile may slip through).
                }
            }
            foreach (int fd in OpenDescriptors())
            {
                if (fd > 2) Check(lib.AddClose(actions, fd), "a close-descriptor action", request);
            }
        }

        private static IEnumerable<int> OpenDescriptors()
        {
            List<int> open = new List<int>();
            foreach (string entry in Directory.GetFileSystemEntries("/proc/self/fd"))
            {
                int fd;
                if (int.TryParse(Path.GetFileName(entry), out fd)) open.Add(fd);
            }
            return open;  // the listing's own descriptor is closed by now; closing a closed one in the child is harmless
        }

        /// <summary>This process's environment with the request's on top, as `NAME=value` strings.</summary>
        private static List<string> Environment(SpawnRequest request)
        {
            Dictionary<string, string> merged = new Dictionary<string, string>(StringComparer.Ordinal);
            foreach (DictionaryEntry pair in System.Environment.GetEnvironmentVariables()) merged[(string)pair.Key] = (string)pair.Value;
            if (request.Environment != null)
            {
                foreach (KeyValuePair<string, string> pair in request.Environment)
                {
                    if (pair.Value == null) merged.Remove(pair.Key);
                    else merged[pair.Key] = pair.Value;
                }
            }
            List<string> block = new List<string>(merged.Count);
            foreach (KeyValuePair<string, string> pair in merged)
            {
                if (pair.Key.Length == 0 || pair.Key.IndexOf('=') >= 0) continue;
                block.Add(pair.Key + "=" + pair.Value);
            }
            return block;
        }

        private static void Check(int error, string what, SpawnRequest request)
        {
            if (error != 0)
                throw new SpawnException("cannot start '" + request.Executable + "': " + what + " failed: " + Errno.Describe(error), error);
        }

        public override bool IsAlive(int pid)
        {
            if (pid <= 0) return false;
            bool child;
            lock (Children) child = Children.Contains(pid);
            if (child) Reap(pid);
            if (lib.Kill(pid, 0) != 0 && lib.LastError != Libc.NotPermitted) return false;
            return !IsZombie(pid);
        }

        public override void Reap(int pid)
        {
            int code;
            bool gone;
            if (lib.TryReap(pid, out code, out gone) || gone) Forget(pid);
        }

        /// <summary>`pid` ended and was reaped: no longer a child of ours (the number may be reused by anyone).</summary>
        internal static void Forget(int pid)
        {
            lock (Children) Children.Remove(pid);
        }

        public override bool Terminate(int pid)
        {
            return pid > 0 && lib.Kill(pid, Libc.SigTerm) == 0;
        }

        public override bool Kill(int pid)
        {
            return pid > 0 && lib.Kill(pid, Libc.SigKill) == 0;
        }

        /// <summary>Linux: a process that ended but was not reaped by its (other) parent yet. macOS has no /proc: false.</summary>
        private static bool IsZombie(int pid)
        {
            string stat = "/proc/" + pid + "/stat";
            try
            {
                if (!File.Exists(stat)) return false;
                string text = File.ReadAllText(stat);
                int close = text.LastIndexOf(')');
                return close > 0 && close + 2 < text.Length && text[close + 2] == 'Z';
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException)
            {
                return false;
            }
        }
    }

    /// <summary>A child started by <see cref="PosixSpawner"/>.</summary>
    internal sealed class PosixProcess : SpawnedProcess
    {
        private readonly Libc lib;
        private readonly int pid;
        private readonly object gate = new object();
        private bool exited;
        private int exitCode = -1;

        public PosixProcess(Libc lib, int pid)
        {
            this.lib = lib;
            this.pid = pid;
        }

        public override int Id
        {
            get { return pid; }
        }

        public override bool HasExited
        {
            get
            {
                lock (gate)
                {
                    if (exited) return true;
                    int code;
                    bool gone;
                    if (lib.TryReap(pid, out code, out gone) || gone)
                    {
                        PosixSpawner.Forget(pid);
                        exited = true;
                        exitCode = code;  // -1 when someone else reaped it (the code is theirs)
                    }
                    return exited;
                }
            }
        }

        public override int ExitCode
        {
            get { return HasExited ? exitCode : -1; }
        }

        public override void Kill()
        {
            if (!HasExited) lib.Kill(pid, Libc.SigKill);
        }
    }
}
