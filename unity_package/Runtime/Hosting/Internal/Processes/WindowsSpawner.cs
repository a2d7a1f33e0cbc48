#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_WIN || (UNITY_STANDALONE_WIN && !UNITY_EDITOR)
using System;
using System.Collections;
using System.Collections.Generic;
using System.ComponentModel;
using System.Runtime.InteropServices;
using System.Text;

namespace CoreAI.Launcher
{
    /// <summary>
    /// CreateProcessW on Windows, written against the Win32 contract (it cannot run on the Linux machine that builds the
    /// package; tests/unity_layer/test_spawn_windows.py checks what can be checked there):
    /// <list type="bullet">
    /// <item>the command line quoted by <see cref="WindowsCommandLine"/>; a .cmd/.bat file through cmd.exe from the system
    /// folder, since CreateProcessW itself cannot run one;</item>
    /// <item>CREATE_NO_WINDOW (no console window flashes up), CREATE_UNICODE_ENVIRONMENT (the block is UTF-16),
    /// CREATE_SUSPENDED (the process joins the job before its first instruction, so whatever it starts joins too),
    /// EXTENDED_STARTUPINFO_PRESENT;</item>
    /// <item>inheritance limited by PROC_THREAD_ATTRIBUTE_HANDLE_LIST to the two handles it needs: the log (stdout and
    /// stderr, opened FILE_APPEND_DATA so every write appends) and the null device (stdin). bInheritHandles must be TRUE
    /// for the list to apply; nothing else this process holds, inheritable or not, reaches the child;</item>
    /// <item>a job object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE whose handle is never closed: when this process ends,
    /// however it ends, Windows closes the handle and ends the runtime with it (`--parent-pid` does the same from the
    /// runtime's side). A raw handle, not a SafeHandle, so a domain reload does not close it.</item>
    /// </list>
    /// </summary>
    internal sealed class WindowsSpawner : ProcessSpawner
    {
        private static readonly List<IntPtr> Jobs = new List<IntPtr>();

        public override int CurrentProcessId
        {
            get { return Kernel32.GetCurrentProcessId(); }
        }

        public override SpawnedProcess Spawn(SpawnRequest request)
        {
            if (request == null) throw new ArgumentNullException(nameof(request));
            string application = request.Executable;
            string line;
            if (WindowsCommandLine.IsBatch(request.Executable))
            {
                application = WindowsCommandLine.SystemCmd();
                line = WindowsCommandLine.ForBatch(application, request.Executable, request.Arguments ?? new List<string>());
            }
            else
            {
                line = WindowsCommandLine.ForProgram(request.Executable, request.Arguments ?? new List<string>());
            }
            using (NativeMemory memory = new NativeMemory())
            {
                IntPtr log = Open(memory, request.LogPath, Kernel32.FileAppendData | Kernel32.Synchronize | Kernel32.FileReadAttributes,
                    Kernel32.OpenAlways, request);
                IntPtr nul = IntPtr.Zero;
                IntPtr attributes = IntPtr.Zero;
                try
                {
                    nul = Open(memory, "NUL", Kernel32.GenericRead, Kernel32.OpenExisting, request);
                    attributes = HandleList(memory, new[] { log, nul }, request);
                    Kernel32.StartupInfoEx startup = new Kernel32.StartupInfoEx();
                    startup.Size = Marshal.SizeOf(typeof(Kernel32.StartupInfoEx));
                    startup.Flags = Kernel32.StartfUseStdHandles;
                    startup.StdInput = nul;
                    startup.StdOutput = log;
                    startup.StdError = log;
                    startup.AttributeList = attributes;
                    uint flags = Kernel32.CreateSuspended | Kernel32.CreateNoWindow | Kernel32.CreateUnicodeEnvironment
                        | Kernel32.ExtendedStartupInfoPresent;
                    IntPtr directory = string.IsNullOrEmpty(request.WorkingDirectory) ? IntPtr.Zero : memory.Utf16(request.WorkingDirectory);
                    Kernel32.ProcessInformation info;
                    if (!Kernel32.CreateProcess(memory.Utf16(application), memory.Utf16(line), IntPtr.Zero, IntPtr.Zero, true, flags,
                            memory.Utf16(EnvironmentBlock(request)), directory, ref startup, out info))
                        throw Failed("CreateProcessW", request);
                    JoinJob(info.Process);
                    Kernel32.ResumeThread(info.Thread);
                    Kernel32.CloseHandle(info.Thread);
                    return new WindowsProcess(info.ProcessId, info.Process);
                }
                finally
                {
                    if (attributes != IntPtr.Zero) Kernel32.DeleteProcThreadAttributeList(attributes);
                    if (nul != IntPtr.Zero) Kernel32.CloseHandle(nul);
                    Kernel32.CloseHandle(log);
                }
            }
        }

        /// <summary>An inheritable handle (only the handle list decides what the child really inherits).</summary>
        private static IntPtr Open(NativeMemory memory, string path, uint access, uint creation, SpawnRequest request)
        {
            Kernel32.SecurityAttributes inheritable = new Kernel32.SecurityAttributes
            {
                Length = Marshal.SizeOf(typeof(Kernel32.SecurityAttributes)),
                InheritHandle = 1,
            };
            IntPtr handle = Kernel32.CreateFile(memory.Utf16(path), access, Kernel32.FileShareAll, ref inheritable, creation,
                Kernel32.FileAttributeNormal, IntPtr.Zero);
            if (handle == Kernel32.InvalidHandle) throw Failed("opening " + (path == "NUL" ? "the null device" : "the log"), request);
            return handle;
        }

        private static IntPtr HandleList(NativeMemory memory, IList<IntPtr> handles, SpawnRequest request)
        {
            IntPtr size = IntPtr.Zero;
            Kernel32.InitializeProcThreadAttributeList(IntPtr.Zero, 1, 0, ref size);  // asks for the size (fails by design)
            IntPtr list = memory.Zeroed((int)size);
            if (!Kernel32.InitializeProcThreadAttributeList(list, 1, 0, ref size)) throw Failed("InitializeProcThreadAttributeList", request);
            IntPtr values = memory.Pointers(handles);  // must stay allocated until CreateProcessW returned: freed with `memory`
            if (!Kernel32.UpdateProcThreadAttribute(list, 0, Kernel32.ProcThreadAttributeHandleList, values,
                    (IntPtr)(IntPtr.Size * handles.Count), IntPtr.Zero, IntPtr.Zero))
            {
                Kernel32.DeleteProcThreadAttributeList(list);
                throw Failed("UpdateProcThreadAttribute", request);
            }
            return list;
        }

        /// <summary>The kill-on-close job; without one (an old Windows, a job that forbids nesting) `--parent-pid` still ties.</summary>
        private static void JoinJob(IntPtr process)
        {
            IntPtr job = Kernel32.CreateJobObject(IntPtr.Zero, IntPtr.Zero);
            if (job == IntPtr.Zero) return;
            Kernel32.JobObjectExtendedLimits limits = new Kernel32.JobObjectExtendedLimits();
            limits.BasicLimitInformation.LimitFlags = Kernel32.JobObjectLimitKillOnJobClose;
            int size = Marshal.SizeOf(typeof(Kernel32.JobObjectExtendedLimits));
            IntPtr buffer = Marshal.AllocHGlobal(size);
            try
            {
                Marshal.StructureToPtr(limits, buffer, false);
                if (!Kernel32.SetInformationJobObject(job, Kernel32.JobObjectExtendedLimitInformation, buffer, (uint)size)
                    || !Kernel32.AssignProcessToJobObject(job, process))
                {
                    Kernel32.CloseHandle(job);
                    return;
                }
            }
            finally
            {
                Marshal.FreeHGlobal(buffer);
            }
            lock (Jobs) Jobs.Add(job);
        }

        /// <summary>
        /// This process's environment with the request's on top: `NAME=value\0…\0\0` in UTF-16, sorted by name without
        /// regard to case, as CreateProcessW documents it.
        /// </summary>
        internal static string EnvironmentBlock(SpawnRequest request)
        {
            SortedDictionary<string, string> merged = new SortedDictionary<string, string>(StringComparer.OrdinalIgnoreCase);
            foreach (DictionaryEntry pair in Environment.GetEnvironmentVariables()) merged[(string)pair.Key] = (string)pair.Value;
            if (request.Environment != null)
            {
                foreach (KeyValuePair<string, string> pair in request.Environment)
                {
                    if (pair.Value == null) merged.Remove(pair.Key);
                    else merged[pair.Key] = pair.Value;
                }
            }
            StringBuilder block = new StringBuilder();
            foreach (KeyValuePair<string, string> pair in merged)
            {
                if (pair.Key.Length == 0 || pair.Key.IndexOf('=') >= 0 || pair.Key.IndexOf('\0') >= 0 || (pair.Value ?? "").IndexOf('\0') >= 0) continue;
                block.Append(pair.Key).Append('=').Append(pair.Value).Append('\0');
            }
            if (block.Length == 0) block.Append('\0');
            return block.ToString();  // NativeMemory.Utf16 adds the final NUL
        }

        private static SpawnException Failed(string what, SpawnRequest request)
        {
            int error = Marshal.GetLastWin32Error();
            return new SpawnException("cannot start '" + request.Executable + "': " + what + " failed: " + new Win32Exception(error).Message
                + " (Win32 error " + error + ")", error);
        }

        public override bool IsAlive(int pid)
        {
            if (pid <= 0) return false;
            IntPtr process = Kernel32.OpenProcess(Kernel32.Synchronize | Kernel32.ProcessQueryLimitedInformation, false, pid);
            if (process == IntPtr.Zero) return Marshal.GetLastWin32Error() == Kernel32.ErrorAccessDenied;  // exists, not ours to open
            try
            {
                return Kernel32.WaitForSingleObject(process, 0) == Kernel32.WaitTimeout;
            }
            finally
            {
                Kernel32.CloseHandle(process);
            }
        }

        public override bool Terminate(int pid)
        {
            return false;  // Windows has no SIGTERM: the launcher's Shutdown call is the graceful stop
        }

        public override bool Kill(int pid)
        {
            if (pid <= 0) return false;
            IntPtr process = Kernel32.OpenProcess(Kernel32.ProcessTerminate, false, pid);
            if (process == IntPtr.Zero) return false;
            try
            {
                return Kernel32.TerminateProcess(process, 1);
            }
            finally
            {
                Kernel32.CloseHandle(process);
            }
        }
    }

    /// <summary>A process started by <see cref="WindowsSpawner"/>, held by its process handle.</summary>
    internal sealed class WindowsProcess : SpawnedProcess
    {
        private readonly int pid;
        private IntPtr handle;

        public WindowsProcess(int pid, IntPtr handle)
        {
            this.pid = pid;
            this.handle = handle;
        }

        public override int Id
        {
            get { return pid; }
        }

        public override bool HasExited
        {
            get
            {
                IntPtr current = handle;
                return current == IntPtr.Zero || Kernel32.WaitForSingleObject(current, 0) == Kernel32.WaitObject0;
            }
        }

        public override int ExitCode
        {
            get
            {
                int code;
                IntPtr current = handle;
                if (current == IntPtr.Zero || !HasExited || !Kernel32.GetExitCodeProcess(current, out code)) return -1;
                return code;
            }
        }

        public override void Kill()
        {
            IntPtr current = handle;
            if (current != IntPtr.Zero && !HasExited) Kernel32.TerminateProcess(current, 1);
        }

        public override void Dispose()
        {
            IntPtr current = handle;
            handle = IntPtr.Zero;
            if (current != IntPtr.Zero) Kernel32.CloseHandle(current);
        }
    }
}
#endif
