using System;

namespace CoreAI.Launcher
{
    /// <summary>
    /// Starts, probes and ends processes through the operating system itself: posix_spawn on Linux and macOS
    /// (<see cref="PosixSpawner"/>), CreateProcessW with a job object on Windows (<see cref="WindowsSpawner"/>). The
    /// launcher uses this on every scripting backend; System.Diagnostics.Process is never involved, since IL2CPP's class
    /// library does not implement Process.Start on desktop players. Chosen by the OS, not the scripting backend.
    /// </summary>
    internal abstract class ProcessSpawner
    {
        private static ProcessSpawner current;

        /// <summary>The spawner of this machine's OS; throws PlatformNotSupportedException where none is compiled.</summary>
        public static ProcessSpawner Current
        {
            get
            {
                if (current != null) return current;
                ProcessSpawner chosen = Choose();
                if (chosen == null) throw new PlatformNotSupportedException("this platform cannot start the CoreAI runtime as a process");
                current = chosen;
                return current;
            }
        }

        /// <summary>Starts `request`; throws <see cref="SpawnException"/> saying why it could not.</summary>
        public abstract SpawnedProcess Spawn(SpawnRequest request);

        /// <summary>This process's own id.</summary>
        public abstract int CurrentProcessId { get; }

        /// <summary>True while a process with this id runs (a zombie counts as gone; one of ours is reaped on the way).</summary>
        public abstract bool IsAlive(int pid);

        /// <summary>Collects the exit status of `pid`, a child of this process, if it ended (Linux, macOS); nothing elsewhere.</summary>
        public virtual void Reap(int pid)
        {
        }

        /// <summary>Asks the process to stop (SIGTERM); false where the OS has no such request (Windows) or it failed.</summary>
        public abstract bool Terminate(int pid);

        /// <summary>Ends the process at once; false when it could not (gone already, or not ours to end).</summary>
        public abstract bool Kill(int pid);

        private static ProcessSpawner Choose()
        {
            if (Platform.IsWindows) return Windows();
            return Libc.Current == null ? null : new PosixSpawner(Libc.Current);
        }

        private static ProcessSpawner Windows()
        {
#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_WIN || (UNITY_STANDALONE_WIN && !UNITY_EDITOR)
            return new WindowsSpawner();
#else
            return null;
#endif
        }
    }
}
