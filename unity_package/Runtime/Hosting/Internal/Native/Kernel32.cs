#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_WIN || (UNITY_STANDALONE_WIN && !UNITY_EDITOR)
using System;
using System.Runtime.InteropServices;

namespace CoreAI.Launcher
{
    /// <summary>
    /// The Win32 calls of the Windows spawner, the process probes and the owner-only ACL. Compiled only for the Windows
    /// editor and players (and outside Unity), so no other build carries a kernel32 or advapi32 P/Invoke. Structures are
    /// declared with pointer-sized fields where Win32 has them, so one declaration fits 32- and 64-bit processes.
    /// </summary>
    internal static class Kernel32
    {
        public const uint CreateSuspended = 0x00000004;
        public const uint CreateUnicodeEnvironment = 0x00000400;
        public const uint ExtendedStartupInfoPresent = 0x00080000;
        public const uint CreateNoWindow = 0x08000000;
        public const int StartfUseStdHandles = 0x00000100;
        public static readonly IntPtr ProcThreadAttributeHandleList = (IntPtr)0x00020002;

        public const uint GenericRead = 0x80000000;
        public const uint FileAppendData = 0x00000004;
        public const uint Synchronize = 0x00100000;
        public const uint FileReadAttributes = 0x00000080;
        public const uint FileShareAll = 0x1 | 0x2 | 0x4;  // read, write, delete
        public const uint OpenExisting = 3;
        public const uint OpenAlways = 4;
        public const uint FileAttributeNormal = 0x80;
        public static readonly IntPtr InvalidHandle = new IntPtr(-1);

        public const uint ProcessTerminate = 0x0001;
        public const uint ProcessQueryLimitedInformation = 0x1000;
        public const uint WaitObject0 = 0;
        public const uint WaitTimeout = 0x102;
        public const int ErrorAccessDenied = 5;
        public const int ErrorInsufficientBuffer = 122;
        public const int StillActive = 259;

        public const int JobObjectExtendedLimitInformation = 9;
        public const uint JobObjectLimitKillOnJobClose = 0x2000;

        /// <summary>SECURITY_ATTRIBUTES (24 bytes in a 64-bit process).</summary>
        [StructLayout(LayoutKind.Sequential)]
        public struct SecurityAttributes
        {
            public int Length;
            public IntPtr SecurityDescriptor;
            public int InheritHandle;
        }

        /// <summary>STARTUPINFOEXW: STARTUPINFOW and the attribute list (112 bytes in a 64-bit process).</summary>
        [StructLayout(LayoutKind.Sequential)]
        public struct StartupInfoEx
        {
            public int Size;
            public IntPtr Reserved;
            public IntPtr Desktop;
            public IntPtr Title;
            public int X;
            public int Y;
            public int XSize;
            public int YSize;
            public int XCountChars;
            public int YCountChars;
            public int FillAttribute;
            public int Flags;
            public short ShowWindow;
            public short Reserved2Size;
            public IntPtr Reserved2;
            public IntPtr StdInput;
            public IntPtr StdOutput;
            public IntPtr StdError;
            public IntPtr AttributeList;
        }

        /// <summary>PROCESS_INFORMATION (24 bytes in a 64-bit process).</summary>
        [StructLayout(LayoutKind.Sequential)]
        public struct ProcessInformation
        {
            public IntPtr Process;
            public IntPtr Thread;
            public int ProcessId;
            public int ThreadId;
        }

        [StructLayout(LayoutKind.Sequential)]
        public struct JobObjectBasicLimits
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
        public struct IoCounters
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
        public struct JobObjectExtendedLimits
        {
            public JobObjectBasicLimits BasicLimitInformation;
            public IoCounters IoInfo;
            public UIntPtr ProcessMemoryLimit;
            public UIntPtr JobMemoryLimit;
            public UIntPtr PeakProcessMemoryUsed;
            public UIntPtr PeakJobMemoryUsed;
        }

        [DllImport("kernel32.dll", EntryPoint = "CreateProcessW", SetLastError = true)]
        public static extern bool CreateProcess(IntPtr applicationName, IntPtr commandLine, IntPtr processAttributes, IntPtr threadAttributes,
            bool inheritHandles, uint creationFlags, IntPtr environment, IntPtr currentDirectory, ref StartupInfoEx startupInfo,
            out ProcessInformation processInformation);

        [DllImport("kernel32.dll", EntryPoint = "CreateFileW", SetLastError = true)]
        public static extern IntPtr CreateFile(IntPtr fileName, uint access, uint share, ref SecurityAttributes security, uint creation,
            uint flags, IntPtr template);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern bool InitializeProcThreadAttributeList(IntPtr list, int count, int flags, ref IntPtr size);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern bool UpdateProcThreadAttribute(IntPtr list, uint flags, IntPtr attribute, IntPtr value, IntPtr size,
            IntPtr previousValue, IntPtr returnSize);

        [DllImport("kernel32.dll")]
        public static extern void DeleteProcThreadAttributeList(IntPtr list);

        [DllImport("kernel32.dll", EntryPoint = "CreateJobObjectW", SetLastError = true)]
        public static extern IntPtr CreateJobObject(IntPtr attributes, IntPtr name);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern bool SetInformationJobObject(IntPtr job, int infoClass, IntPtr info, uint length);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern bool AssignProcessToJobObject(IntPtr job, IntPtr process);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern uint ResumeThread(IntPtr thread);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern IntPtr OpenProcess(uint access, bool inheritHandle, int processId);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern uint WaitForSingleObject(IntPtr handle, uint milliseconds);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern bool GetExitCodeProcess(IntPtr process, out int exitCode);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern bool TerminateProcess(IntPtr process, uint exitCode);

        [DllImport("kernel32.dll", SetLastError = true)]
        public static extern bool CloseHandle(IntPtr handle);

        [DllImport("kernel32.dll")]
        public static extern int GetCurrentProcessId();

        [DllImport("kernel32.dll")]
        public static extern IntPtr GetCurrentProcess();

        [DllImport("kernel32.dll")]
        public static extern IntPtr LocalFree(IntPtr memory);

        // advapi32: the current user's SID and an owner-only DACL (OwnerOnly).

        public const uint TokenQuery = 0x0008;
        public const int TokenUser = 1;
        public const uint SddlRevision1 = 1;
        public const int SeFileObject = 1;
        public const uint DaclSecurityInformation = 0x00000004;
        public const uint ProtectedDaclSecurityInformation = 0x80000000;

        [DllImport("advapi32.dll", SetLastError = true)]
        public static extern bool OpenProcessToken(IntPtr process, uint access, out IntPtr token);

        [DllImport("advapi32.dll", SetLastError = true)]
        public static extern bool GetTokenInformation(IntPtr token, int infoClass, IntPtr info, int length, out int returnLength);

        [DllImport("advapi32.dll", EntryPoint = "ConvertSidToStringSidW", SetLastError = true)]
        public static extern bool ConvertSidToStringSid(IntPtr sid, out IntPtr stringSid);

        [DllImport("advapi32.dll", EntryPoint = "ConvertStringSecurityDescriptorToSecurityDescriptorW", SetLastError = true)]
        public static extern bool ConvertStringSecurityDescriptorToSecurityDescriptor(IntPtr sddl, uint revision, out IntPtr descriptor,
            out uint size);

        [DllImport("advapi32.dll", SetLastError = true)]
        public static extern bool GetSecurityDescriptorDacl(IntPtr descriptor, out bool present, out IntPtr dacl, out bool defaulted);

        [DllImport("advapi32.dll", EntryPoint = "SetNamedSecurityInfoW")]
        public static extern int SetNamedSecurityInfo(IntPtr objectName, int objectType, uint securityInfo, IntPtr owner, IntPtr group,
            IntPtr dacl, IntPtr sacl);
    }
}
#endif
