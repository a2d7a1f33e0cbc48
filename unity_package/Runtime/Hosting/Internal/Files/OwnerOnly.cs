using System;
using System.IO;
using System.Runtime.InteropServices;
using System.Text.RegularExpressions;

namespace CoreAI.Launcher
{
    /// <summary>
    /// Makes a file readable and writable by its owner only: mode 0600 on Linux and macOS (chmod), on Windows a
    /// protected DACL with one entry, full control for the current user named by SID (`D:P(A;;FA;;;S-1-5-21-…)`) —
    /// never by `DOMAIN\user`, a name that breaks on localized Windows and Azure AD accounts. Nothing is spawned
    /// (no icacls, no chmod).
    /// </summary>
    internal static class OwnerOnly
    {
        private const int OwnerReadWrite = 0x180;  // 0600
        private static readonly Regex Sid = new Regex(@"^S-1-\d+(-\d+)+$");

        /// <summary>Restrict `path`; throws IOException when the permissions cannot be set (the caller must not write secrets then).</summary>
        public static void Restrict(string path)
        {
            if (Platform.IsWindows)
            {
                RestrictWindows(path);
                return;
            }
            if (Posix.Chmod(path, OwnerReadWrite) != 0)
                throw new IOException("cannot make " + Path.GetFileName(path) + " private (chmod 600 failed, errno " + Posix.LastError + ")");
        }

        /// <summary>The SDDL of a protected DACL granting `sid` (e.g. S-1-5-21-…-1001) full control and nobody else anything.</summary>
        public static string OwnerOnlyDacl(string sid)
        {
            if (sid == null || !Sid.IsMatch(sid)) throw new ArgumentException("not a SID in string form: '" + sid + "'");
            return "D:P(A;;FA;;;" + sid + ")";
        }

#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR_WIN || (UNITY_STANDALONE_WIN && !UNITY_EDITOR)
        private static void RestrictWindows(string path)
        {
            string sddl = OwnerOnlyDacl(CurrentUserSid());
            using (NativeMemory memory = new NativeMemory())
            {
                IntPtr descriptor;
                uint size;
                if (!Kernel32.ConvertStringSecurityDescriptorToSecurityDescriptor(memory.Utf16(sddl), Kernel32.SddlRevision1, out descriptor, out size))
                    throw Failed(path, "the owner-only ACL could not be built", Marshal.GetLastWin32Error());
                try
                {
                    bool present;
                    bool defaulted;
                    IntPtr dacl;
                    if (!Kernel32.GetSecurityDescriptorDacl(descriptor, out present, out dacl, out defaulted) || !present)
                        throw Failed(path, "the owner-only ACL has no DACL", Marshal.GetLastWin32Error());
                    // PROTECTED: entries inherited from the folder are dropped, not merged in.
                    int error = Kernel32.SetNamedSecurityInfo(memory.Utf16(Path.GetFullPath(path)), Kernel32.SeFileObject,
                        Kernel32.DaclSecurityInformation | Kernel32.ProtectedDaclSecurityInformation, IntPtr.Zero, IntPtr.Zero, dacl, IntPtr.Zero);
                    if (error != 0) throw Failed(path, "SetNamedSecurityInfo refused the owner-only ACL", error);
                }
                finally
                {
                    Kernel32.LocalFree(descriptor);
                }
            }
        }

        /// <summary>The current user's SID as `S-1-5-…`, from this process's token.</summary>
        internal static string CurrentUserSid()
        {
            IntPtr token;
            if (!Kernel32.OpenProcessToken(Kernel32.GetCurrentProcess(), Kernel32.TokenQuery, out token))
                throw new IOException("cannot read this process's user (OpenProcessToken: Win32 error " + Marshal.GetLastWin32Error() + ")");
            try
            {
                int length;
                Kernel32.GetTokenInformation(token, Kernel32.TokenUser, IntPtr.Zero, 0, out length);  // asks for the size
                IntPtr info = Marshal.AllocHGlobal(Math.Max(length, 1));
                try
                {
                    if (!Kernel32.GetTokenInformation(token, Kernel32.TokenUser, info, length, out length))
                        throw new IOException("cannot read this process's user (GetTokenInformation: Win32 error " + Marshal.GetLastWin32Error() + ")");
                    IntPtr text;
                    // TOKEN_USER starts with SID_AND_ATTRIBUTES, whose first field is the SID pointer.
                    if (!Kernel32.ConvertSidToStringSid(Marshal.ReadIntPtr(info), out text))
                        throw new IOException("cannot read this process's user (ConvertSidToStringSid: Win32 error " + Marshal.GetLastWin32Error() + ")");
                    try
                    {
                        return Marshal.PtrToStringUni(text);
                    }
                    finally
                    {
                        Kernel32.LocalFree(text);
                    }
                }
                finally
                {
                    Marshal.FreeHGlobal(info);
                }
            }
            finally
            {
                Kernel32.CloseHandle(token);
            }
        }

        private static IOException Failed(string path, string what, int error)
        {
            return new IOException("cannot make " + Path.GetFileName(path) + " private: " + what + " (Win32 error " + error + ")");
        }
#else
        private static void RestrictWindows(string path)
        {
            throw new IOException("cannot make " + Path.GetFileName(path) + " private: no Windows ACL support in this build");
        }
#endif
    }
}
