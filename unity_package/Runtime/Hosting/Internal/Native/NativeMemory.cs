using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;

namespace CoreAI.Launcher
{
    /// <summary>
    /// Unmanaged memory for one native call, freed together on Dispose: NUL-terminated UTF-8 and UTF-16 strings, NULL-
    /// terminated string arrays (argv, envp) and zeroed blocks for the C library's opaque structs. Strings go to native
    /// code as bytes the package encoded itself, so Mono and IL2CPP hand over the same thing (no marshaller defaults).
    /// </summary>
    internal sealed class NativeMemory : IDisposable
    {
        private readonly List<IntPtr> blocks = new List<IntPtr>();

        /// <summary>A zero-filled block of `size` bytes.</summary>
        public IntPtr Zeroed(int size)
        {
            IntPtr block = Allocate(size);
            Marshal.Copy(new byte[size], 0, block, size);
            return block;
        }

        /// <summary>`text` as NUL-terminated UTF-8 (a C string); refuses a NUL inside it.</summary>
        public IntPtr Utf8(string text)
        {
            if (text == null) throw new ArgumentNullException(nameof(text));
            if (text.IndexOf('\0') >= 0) throw new ArgumentException("a NUL character cannot be passed to the operating system");
            byte[] bytes = Encoding.UTF8.GetBytes(text);
            IntPtr block = Allocate(bytes.Length + 1);
            Marshal.Copy(bytes, 0, block, bytes.Length);
            Marshal.WriteByte(block, bytes.Length, 0);
            return block;
        }

        /// <summary>`items` as a NULL-terminated array of C strings (argv, envp).</summary>
        public IntPtr Utf8Array(IList<string> items)
        {
            IntPtr array = Allocate((items.Count + 1) * IntPtr.Size);
            for (int i = 0; i < items.Count; i++) Marshal.WriteIntPtr(array, i * IntPtr.Size, Utf8(items[i]));
            Marshal.WriteIntPtr(array, items.Count * IntPtr.Size, IntPtr.Zero);
            return array;
        }

        /// <summary>`chars` as UTF-16 in a writable block (CreateProcessW may write into its command line).</summary>
        public IntPtr Utf16(string chars)
        {
            if (chars == null) return IntPtr.Zero;
            IntPtr block = Allocate((chars.Length + 1) * 2);
            Marshal.Copy(chars.ToCharArray(), 0, block, chars.Length);
            Marshal.WriteInt16(block, chars.Length * 2, 0);
            return block;
        }

        /// <summary>`handles` as an array of pointers.</summary>
        public IntPtr Pointers(IList<IntPtr> handles)
        {
            IntPtr array = Allocate(Math.Max(1, handles.Count) * IntPtr.Size);
            for (int i = 0; i < handles.Count; i++) Marshal.WriteIntPtr(array, i * IntPtr.Size, handles[i]);
            return array;
        }

        /// <summary>Frees every block.</summary>
        public void Dispose()
        {
            foreach (IntPtr block in blocks) Marshal.FreeHGlobal(block);
            blocks.Clear();
        }

        private IntPtr Allocate(int size)
        {
            IntPtr block = Marshal.AllocHGlobal(size);
            blocks.Add(block);
            return block;
        }
    }
}
