using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;

namespace CoreAI.Launcher
{
    /// <summary>
    /// Ties the runtime to the game, so it never outlives it. Everywhere the runtime gets `--parent-pid`
    /// (this process's id) and stops itself when this process dies. On Windows the OS also does it: the
    /// runtime goes into a job object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE whose handle is never
    /// closed, so when the game dies, however it dies, Windows closes the handle and kills the runtime.
    /// Linux and macOS offer no such tie from a .NET parent (PR_SET_PDEATHSIG follows the spawning
    /// thread, which a thread pool may retire), so there `--parent-pid` is the tie.
    /// </summary>
    internal static class ProcessLifeline
    {
        private const int JobObjectExtendedLimitInformation = 9;
        private const uint JobObjectLimitKillOnJobClose = 0x2000;

        // Raw handles, never closed: a SafeHandle would close (and kill the runtime) when an editor domain
        // reload unloads this class, yet the runtime must survive a reload and die only with the editor.
        private static readonly List<IntPtr> Jobs = new List<IntPtr>();
        private static int currentProcessId;

        /// <summary>This process's id (the game's, or the editor's).</summary>
        public static int CurrentProcessId
        {
            get
            {
                if (currentProcessId == 0)
                {
                    using (Process self = Process.GetCurrentProcess()) currentProcessId = self.Id;
                }
                return currentProcessId;
            }
        }

        /// <summary>On Windows, puts `process` in a kill-on-close job held by this process; elsewhere nothing (see the class).</summary>
        public static bool TieToThisProcess(Process process)
        {
            if (!Platform.IsWindows || process == null) return false;
            try
            {
                return TieOnWindows(process.Handle);
            }
            catch (Exception e) when (e is DllNotFoundException || e is EntryPointNotFoundException || e is InvalidOperationException)
            {
                return false; // `--parent-pid` still stops the runtime
            }
        }

#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_WIN || UNITY_STANDALONE_WIN
        private static bool TieOnWindows(IntPtr processHandle)
        {
            IntPtr job = CreateJobObject(IntPtr.Zero, null);
            if (job == IntPtr.Zero) return false;
            JobObjectExtendedLimits limits = new JobObjectExtendedLimits();
            limits.BasicLimitInformation.LimitFlags = JobObjectLimitKillOnJobClose;
            int size = Marshal.SizeOf(typeof(JobObjectExtendedLimits));
            IntPtr buffer = Marshal.AllocHGlobal(size);
            try
            {
                Marshal.StructureToPtr(limits, buffer, false);
                if (!SetInformationJobObject(job, JobObjectExtendedLimitInformation, buffer, (uint)size)
                    || !AssignProcessToJobObject(job, processHandle))
                {
                    CloseHandle(job);
                    return false;
                }
            }
            finally
            {
                Marshal.FreeHGlobal(buffer);
            }
            lock (Jobs) Jobs.Add(job);
            return true;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct JobObjectBasicLimits
        {
            public long PerProcessUserTimeLimit;
            public long PerJobUserTimeLimit;
            public uint LimitFlags;
            public UIntPtr MinimumWorkingSetSize;
            public UIntPtr MaximumWorkingSetSize;
            public uint ActiveProcessLimit;
            public UIntPtr Affinity;
            public uint PriorityClass;
            public uint SchedulingClass;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct IoCounters
        {
            public ulong ReadOperationCount;
            public ulong WriteOperationCount;
            public ulong OtherOperationCount;
            public ulong ReadTransferCount;
            public ulong WriteTransferCount;
            public ulong OtherTransferCount;
        }

        /// <summary>JOBOBJECT_EXTENDED_LIMIT_INFORMATION (144 bytes in a 64-bit process).</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct JobObjectExtendedLimits
        {
            public JobObjectBasicLimits BasicLimitInformation;
            public IoCounters IoInfo;
            public UIntPtr ProcessMemoryLimit;
            public UIntPtr JobMemoryLimit;
            public UIntPtr PeakProcessMemoryUsed;
            public UIntPtr PeakJobMemoryUsed;
        }

        [DllImport("kernel32.dll", CharSet = CharSet.Unicode, SetLastError = true)]
        private static extern IntPtr CreateJobObject(IntPtr attributes, string name);

        [DllImport("kernel32.dll", SetLastError = true)]
        private static extern bool SetInformationJobObject(IntPtr job, int infoClass, IntPtr info, uint length);

        [DllImport("kernel32.dll", SetLastError = true)]
        private static extern bool AssignProcessToJobObject(IntPtr job, IntPtr process);

        [DllImport("kernel32.dll", SetLastError = true)]
        private static extern bool CloseHandle(IntPtr handle);
#else
        // Not a Windows editor or player: no kernel32 P/Invoke for IL2CPP to bind (WebGL, consoles, mobile).
        private static bool TieOnWindows(IntPtr processHandle)
        {
            return false;
        }
#endif
    }
}
